"""Resume, second round (issue 24): BatchNorm snapshot after loading, other cluster shapes, RNG state of the current
device only, checkpoints that plain ``torch.load(weights_only=True)`` reads, explicit paths that do not exist."""

from __future__ import annotations

import glob
import os
import random
import subprocess
import sys
import types

import numpy as np
import pytest
import torch

from conftest import RECIPE, tiny_overrides
from textdet import device as device_mod
from textdet.build import parts, training
from textdet.build.training import build_trainer
from textdet.cli import main
from textdet.config import load_config
from textdet.data.dataset import EpochSampler
from textdet.engine import rng
from textdet.engine.resume import RunShape, continue_at, find_resume
from textdet.engine.schedule import LRSchedule
from textdet.errors import ConfigError
from textdet.runtime import checkpoint


def train_args(opts: list[str]) -> list[str]:
    return ["train", "-c", RECIPE, *[a for o in opts for a in ("-o", o)], "--no-progress", "--device", "cpu"]


@pytest.fixture(scope="module")
def one_epoch_run(synth_root, tmp_path_factory) -> str:
    """A tiny run folder after one epoch (train_resume.ckpt, best.ckpt, e1.ckpt)."""
    run = str(tmp_path_factory.mktemp("one_epoch") / "run")
    assert main(train_args(tiny_overrides(synth_root, run, **{"scheduler.num_epochs": 1}))) == 0
    return run


def test_skipped_step_after_resume_restores_the_loaded_batchnorm_statistics(one_epoch_run, synth_root):
    """Resume, run one forward (BN statistics move), make the gradients NaN: the skipped step puts back the
    statistics of the checkpoint. Before the fix it put back those of the fresh model (means 0, variances 1)."""
    opts = tiny_overrides(synth_root, one_epoch_run, **{"scheduler.num_epochs": 2, "model.resume": True})
    trainer = build_trainer(load_config(RECIPE, opts), device="cpu", progress=False)
    saved = checkpoint.load_checkpoint(os.path.join(one_epoch_run, "train_resume.ckpt"), "test")["model"]
    names = [name for name, b in trainer.model.named_buffers() if b.is_floating_point()]
    assert any(name.endswith("running_var") for name in names)
    trainer.forward_model.train()
    batch = trainer.feed(next(iter(trainer.train_loader)))
    trainer.train_step(batch, sync=True)
    moved = dict(trainer.model.named_buffers())
    assert any(not torch.equal(moved[name], saved[name]) for name in names)  # the forward changed them
    trainer.params[0].grad.fill_(float("nan"))
    assert trainer.optimizer_step() is True  # skipped
    after = dict(trainer.model.named_buffers())
    for name in names:
        assert torch.equal(after[name], saved[name]), name


def test_resume_and_eval_builds_never_fetch_the_pretrained_weights_they_replace(synth_root, tmp_path):
    """model.pretrained is a URL and the tests run offline: only a fresh training run may need it."""
    cfg = load_config(RECIPE, tiny_overrides(synth_root, str(tmp_path), **{
        "model.pretrained": "https://example.invalid/w.ckpt"}))
    assert parts.build_model_from_config(cfg, pretrained_backbone=False) is not None
    with pytest.raises(ConfigError, match="TEXTDET_OFFLINE"):
        parts.build_model_from_config(cfg)


def test_every_checkpoint_loads_with_plain_weights_only(one_epoch_run):
    names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(one_epoch_run, "*.ckpt")))
    assert names == ["best.ckpt", "e1.ckpt", "train_resume.ckpt"]
    for name in names:
        obj = torch.load(os.path.join(one_epoch_run, name), weights_only=True)  # no allow-list
        assert obj["epoch"] == 1
    shape = torch.load(os.path.join(one_epoch_run, "train_resume.ckpt"), weights_only=True)["shape"]
    assert shape == {"world_size": 1, "batch_size": 2, "accumulation": 1}


def test_rng_state_round_trip_draws_the_same_numbers():
    state = rng.rng_state()
    expected = (random.random(), np.random.rand(), torch.rand(1).item(), np.random.randn())
    random.random(), np.random.rand(), torch.rand(3)  # move every generator on
    rng.set_rng_state(state)
    assert (random.random(), np.random.rand(), torch.rand(1).item(), np.random.randn()) == expected


def test_device_rng_state_is_the_current_devices_only(monkeypatch):
    """An MPS-like module: get_rng_state/set_rng_state of the current device, no *_all (which crashed), and a
    checkpoint from a machine with more visible devices (a list) loads."""
    calls = []
    fake = types.SimpleNamespace(get_rng_state=lambda: torch.tensor([7], dtype=torch.uint8),
                                 set_rng_state=lambda state: calls.append(state))
    monkeypatch.setattr(device_mod, "accelerator", lambda: "mps")
    monkeypatch.setattr(device_mod.torch, "get_device_module", lambda kind: fake)
    state = device_mod.rng_state()
    assert list(state) == ["mps"] and state["mps"].tolist() == [7]
    device_mod.set_rng_state(state)
    device_mod.set_rng_state({"mps": [torch.zeros(1), torch.zeros(1)]})  # written per device by older versions
    device_mod.set_rng_state({"cuda": torch.zeros(1)})  # another device type: nothing to restore
    assert [c.tolist() for c in calls] == [[7]]


# ----------------------------------------------------------------------------------------- other cluster shapes
def test_sampler_continues_after_the_samples_all_ranks_used():
    """12 samples, in order (no shuffle): 2 ranks take 0,2,4,.. and 1,3,5,..; after 2 samples each, 0-3 are used.
    One process skipping those 4 sees 4..11, each once."""
    ranks = [EpochSampler(12, shuffle=False, seed=0, rank=r, world_size=2) for r in (0, 1)]
    assert [[i for _, i in s] for s in ranks] == [[0, 2, 4, 6, 8, 10], [1, 3, 5, 7, 9, 11]]
    alone = EpochSampler(12, shuffle=False, seed=0)
    alone.set_epoch(0, skip=4)
    assert [i for _, i in alone] == list(range(4, 12)) and len(alone) == 8
    for s in ranks:  # the same shape resumed: each rank after its own 2
        s.set_epoch(0, skip=4)
    assert [[i for _, i in s] for s in ranks] == [[4, 6, 8, 10], [5, 7, 9, 11]]


def test_other_shape_continues_at_the_same_samples_and_learning_rate():
    """Saved by 2 processes x batch 2 (4 samples per step, 3 steps per epoch of 12) after 1 step of epoch 2: 16
    samples seen, 4 of them in epoch 2. One process x batch 2 (6 steps per epoch) continues after micro-step 2 of
    epoch 2, at optimizer step 6 + 2 = 8, where its schedule has the learning rate of the old one at step 4."""
    ckpt = {"epoch": 1, "step_in_epoch": 1, "step": 4, "shape": RunShape(2, 2, 1).state_dict()}
    position = continue_at(ckpt, RunShape(1, 2, 1), 6, "r.ckpt")
    assert (position.epoch, position.step_in_epoch, position.global_step) == (1, 2, 8)
    old, new = (LRSchedule("polynomial_decay", 0.004, steps, 3, decay_rate=0.9) for steps in (3, 6))
    assert new(8) == pytest.approx(old(4), rel=1e-12)
    same = continue_at(ckpt, RunShape(2, 2, 1), 3, "r.ckpt")
    assert (same.epoch, same.step_in_epoch, same.global_step) == (1, 1, 4)
    with pytest.raises(ConfigError) as info:
        continue_at(ckpt, RunShape(3, 2, 1), 2, "r.ckpt")  # 6 samples per step do not divide 4
    for text in ("r.ckpt", "after 4 samples", "2 process(es) x batch 2 x accumulation 1", "3 process(es)",
                 "divides 4", "2 x 2 x 1"):
        assert text in str(info.value)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _seen(folder: str) -> list[tuple[int, int, int]]:
    """(epoch, optimizer step before the micro-step, sample index) that kill_at.py recorded."""
    rows = []
    for path in glob.glob(os.path.join(folder, "*.txt")):
        rows += [tuple(int(v) for v in line.split()) for line in open(path)]
    return rows


@pytest.mark.slow
def test_two_processes_killed_mid_epoch_resume_as_one(synth_root, tmp_path):
    """2 gloo processes x batch 2 (3 steps an epoch), train_resume.ckpt every step, both killed in step 2: the
    checkpoint holds step 1 (4 samples). Resumed as 1 process x batch 2 x accumulation 2, it trains each of the
    other 8 samples of epoch 1 once, then epoch 2, with its own shape's schedule from the sample it took over.

    Its learning rates are those of a 1 x 2 x 2 run (6 micro-batches, 3 updates an epoch; an update takes its
    window's last micro-batch's rate, as MindOCR's schedule does), half an update ahead of a 2-process run's."""
    kill_at = os.path.join(os.path.dirname(__file__), "kill_at.py")
    common = {"train.ckpt_interval_steps": 1, "system.val_while_train": False}
    killed = str(tmp_path / "killed")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2"]
    first, resumed = str(tmp_path / "seen_first"), str(tmp_path / "seen_resumed")
    two = tiny_overrides(synth_root, killed, **common, **{"system.distribute": True})
    proc = subprocess.run([*torchrun, f"--master_port={_free_port()}", kill_at, "step", "2", *train_args(two)[1:]],
                          env={**env, "TEXTDET_TEST_SEEN": first}, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    ckpt = torch.load(os.path.join(killed, "train_resume.ckpt"), weights_only=True)
    assert (ckpt["epoch"], ckpt["step_in_epoch"], ckpt["step"]) == (0, 1, 1)
    one = tiny_overrides(synth_root, killed, **common, **{"model.resume": True,
                                                          "train.gradient_accumulation_steps": 2})
    proc = subprocess.run([sys.executable, kill_at, "none", "0", *train_args(one)[1:]],
                          env={**env, "TEXTDET_TEST_SEEN": resumed}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    committed = [i for epoch, step, i in _seen(first) if step < 1]
    after = _seen(resumed)
    assert sorted(committed + [i for epoch, _, i in after if epoch == 0]) == list(range(12))
    assert sorted(i for epoch, _, i in after if epoch == 1) == list(range(12))
    log = open(os.path.join(killed, "train.log")).read()
    assert "trained as 2 process(es) x batch 2 x accumulation 1" in log
    import json

    lrs = [json.loads(line)["lr"] for line in open(os.path.join(killed, "metrics.jsonl"))]
    resumed_shape = LRSchedule("polynomial_decay", 0.004, 6, 2, decay_rate=0.9, accumulation=2)
    assert lrs == pytest.approx([resumed_shape(2), resumed_shape(5)], rel=1e-12)  # updates 3 and 6
    end = torch.load(os.path.join(killed, "train_resume.ckpt"), weights_only=True)
    assert end["step"] == 6 and end["epoch"] == 2


# ----------------------------------------------------------------------------------------- explicit paths
@pytest.mark.parametrize("command,key", [("train", "model.resume"), ("train", "model.pretrained"),
                                         ("eval", "eval.ckpt_load_path")])
def test_missing_explicit_path_fails_fast_naming_key_and_path(synth_root, tmp_path, command, key):
    missing = str(tmp_path / "typo" / "x.ckpt")
    opts = tiny_overrides(synth_root, str(tmp_path / "run"), **{key: missing})
    args = [command, "-c", RECIPE, *[a for o in opts for a in ("-o", o)]]
    # CPU time of the process (the wall clock of a shared 2-core machine under load 13 measured 2.7 s for 0.5 s of work)
    script = ("import sys, time; from textdet.cli import main; rc = main(sys.argv[1:]); "
              "print(rc, 'torch' in sys.modules, time.process_time())")
    proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=60)
    rc, torch_imported, seconds = proc.stdout.split()
    assert rc == "2" and f"{key}: {missing} does not exist" in proc.stderr
    assert torch_imported == "False" and float(seconds) < 1.5  # checked before torch is imported
    assert not os.path.exists(tmp_path / "run")


def test_missing_resume_path_is_an_error_in_the_library_too(tmp_path):
    with pytest.raises(ConfigError, match=f"model.resume: {tmp_path}/nope.ckpt does not exist"):
        find_resume(str(tmp_path / "nope.ckpt"), str(tmp_path))
    assert find_resume(True, str(tmp_path)) is None  # True in a new folder: a first run


def test_lr_mult_scales_each_parts_learning_rate_in_the_step(synth_root, tmp_path):
    """optimizer.lr_mult {backbone: 0}: after one update the backbone is where it was, the head has moved, and
    the groups carry the schedule's rate times their factor."""
    opts = tiny_overrides(synth_root, str(tmp_path / "run"), **{"optimizer.lr_mult": "{backbone: 0.0}"})
    trainer = build_trainer(load_config(RECIPE, opts), device="cpu", progress=False)
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    trainer.forward_model.train()
    trainer.train_step(trainer.feed(next(iter(trainer.train_loader))), sync=True)
    assert trainer.optimizer_step() is False
    lr = trainer.schedule(0)
    assert lr > 0 and sorted({g["lr"] for g in trainer.optimizer.param_groups}) == [0.0, lr]
    for name, p in trainer.model.named_parameters():
        moved = not torch.equal(p.detach(), before[name])
        if name.startswith("backbone."):
            assert not moved, name
    assert any(not torch.equal(p.detach(), before[n]) for n, p in trainer.model.named_parameters()
               if n.startswith("head."))


def test_lr_mult_with_an_unknown_part_fails_before_training_naming_where_it_was_set(synth_root, tmp_path):
    opts = tiny_overrides(synth_root, str(tmp_path / "run"), **{"optimizer.lr_mult": "{backbon: 0.1}"})
    cfg = load_config(RECIPE, opts)
    model = parts.build_model_from_config(cfg, pretrained_backbone=False)
    with pytest.raises(ConfigError, match=r"^-o optimizer.lr_mult: .*'backbon' is not a part of the model; "
                                          r"parts: backbone, neck, head"):
        training.build_optimizer_from_config(cfg, model)
