"""DDP under torchrun on CPU (gloo): two processes train the tiny recipe; errors say what is wrong."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
import torch

from conftest import RECIPE, tiny_overrides
from textdet.engine.distributed import init_distributed
from textdet.errors import ConfigError


def _free_port() -> int:
    """A port nobody holds now: a fixed one collides with other torchrun jobs on the same machine."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _opts(root: str, run: str, **extra) -> list[str]:
    out = []
    for o in tiny_overrides(root, run, **extra):
        out += ["-o", o]
    return out


@pytest.mark.slow
def test_torchrun_two_processes(synth_root, tmp_path):
    run = str(tmp_path / "ddp")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", f"--master_port={_free_port()}",
           "-m", "textdet", "train", "-c", RECIPE, "--no-progress",
           *_opts(synth_root, run, **{"system.distribute": True, "scheduler.num_epochs": 1})]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    log = open(os.path.join(run, "train.log")).read()
    assert "Global batch size: 2 x 2 x 1 = 4" in log
    assert "epoch: [1/1] step: [2/3]" in log  # 12 samples / 2 ranks / batch 2 = 3 steps
    (record,) = [json.loads(line) for line in open(os.path.join(run, "metrics.jsonl"))]
    assert {"f-score", "recall", "precision"} <= set(record)
    ck = torch.load(os.path.join(run, "train_resume.ckpt"), weights_only=False)
    assert ck["step"] == 3 and not any(k.startswith("module.") for k in ck["model"])


def test_distribute_without_torchrun_is_explained(monkeypatch):
    for var in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ConfigError, match="not started by torchrun.*torchrun --nproc_per_node"):
        init_distributed(True, "cpu")


def test_torchrun_without_distribute_is_explained(monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ConfigError, match="system.distribute is False.*system.distribute=true"):
        init_distributed(False, "cpu")
