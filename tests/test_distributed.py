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
from textdet.metrics import DetMetric
from textdet.postprocess import DBPostprocess
from textdet.runtime.evaluator import Evaluator, ThresholdSweep
from textdet.runtime.feed import DeviceInput


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


def _summed_counts_on(rank: int, port: int, out_dir: str) -> None:
    """One of two gloo ranks: the eval metric and every threshold-sweep cell hold rank-specific counts; after
    the evaluator's reduce each rank writes what it holds."""
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    init_distributed(True, "cpu")
    post, metric = DBPostprocess(), DetMetric()
    evaluator = Evaluator(None, post, metric, DeviceInput(torch.device("cpu")), None,
                          sweep=ThresholdSweep(post, metric))
    scorers = [metric, *evaluator.sweep.metrics.values()]
    for cell, scorer in enumerate(scorers):
        scorer.set_counts([rank + cell, 1.0, 2.0 * rank, 3.0])
    evaluator._sum_over_ranks()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump([scorer.counts().tolist() for scorer in scorers], f)
    torch.distributed.destroy_process_group()


@pytest.mark.slow
def test_ranks_sum_the_sweep_counts_too_so_they_pick_the_same_thresholds(tmp_path):
    """Each cell of the threshold grid (and the metric) ends with the sum over the two ranks: cell c held
    [c, 1, 0, 3] on rank 0 and [1 + c, 1, 2, 3] on rank 1, so both hold [2c + 1, 2, 2, 6]."""
    torch.multiprocessing.spawn(_summed_counts_on, args=(_free_port(), str(tmp_path)), nprocs=2)
    held = [json.load(open(tmp_path / f"rank{rank}.json")) for rank in (0, 1)]
    assert held[0] == held[1]
    assert len(held[0]) == 1 + 9 * 9
    assert held[0] == [[2.0 * cell + 1, 2.0, 2.0, 6.0] for cell in range(1 + 9 * 9)]
