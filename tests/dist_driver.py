"""Run ``textdet train`` in one process of a distributed launch, with a fault injected (test_preflight.py).

    python tests/dist_driver.py FAULT TRAIN_ARGS...

FAULT: none; devices=N (the machine shows N "cuda" devices); no-backend (gloo is missing from torch);
sleep=R:S (rank R sleeps inside its S-th step); raise=R:S (rank R raises inside its S-th step).
"""

from __future__ import annotations

import os
import sys
import time

import torch
import torch.distributed as dist

from textdet import device
from textdet.cli import main
from textdet.engine.trainer import Trainer

torch.set_num_threads(1)
fault, args = sys.argv[1], sys.argv[2:]
kind, _, value = fault.partition("=")
rank = int(os.environ.get("RANK", "0"))

if kind == "devices":
    device.accelerator = lambda: "cuda"
    torch.accelerator.device_count = lambda: int(value)
elif kind == "no-backend":
    dist.is_backend_available = lambda backend: backend != "gloo"
elif kind in ("sleep", "raise"):
    bad_rank, bad_step = (int(v) for v in value.split(":"))
    real_step = Trainer.train_step
    calls = {"n": 0}

    def train_step(self, batch, sync):
        calls["n"] += 1
        if rank == bad_rank and calls["n"] == bad_step:
            if kind == "sleep":
                time.sleep(600)
            raise RuntimeError(f"injected failure in step {bad_step}")
        return real_step(self, batch, sync)

    Trainer.train_step = train_step
elif kind != "none":
    raise SystemExit(f"unknown fault {fault!r}")
sys.exit(main(["train", *args]))
