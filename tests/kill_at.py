"""Run ``textdet train`` and SIGKILL this process at a chosen moment (used by test_reliability.py).

    python tests/kill_at.py step|eval|save|none N TRAIN_ARGS...

step: inside the N-th optimizer step (gradients computed, weights not yet stepped);
eval: in the N-th evaluation, at its first post-processed batch;
save: in the N-th checkpoint write, after half of the bytes reached the temp file;
none: no kill. With TEXTDET_TEST_SEEN=DIR each process appends "epoch optimizer-step index" per trained sample to
DIR/rank<RANK>.txt (test_resume.py).
"""

from __future__ import annotations

import io
import os
import signal
import sys

import torch

from textdet.cli import main
from textdet.data.dataset import DetDataset
from textdet.engine.trainer import Trainer
from textdet.runtime.evaluator import Evaluator

torch.set_num_threads(2)  # as conftest: the same kernels as the in-process reference run
point, n, args = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
calls = {"n": 0}


def due() -> bool:
    calls["n"] += 1
    return calls["n"] == n


def die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


if point == "step":
    real_step = Trainer.optimizer_step

    def optimizer_step(self):
        if due():
            die()
        return real_step(self)  # True when the step was skipped (non-finite)

    Trainer.optimizer_step = optimizer_step
elif point == "eval":
    real_run = Evaluator.run

    def run(self, model):
        if due():
            post = self.postprocess

            def post_then_die(*a, **k):
                post(*a, **k)
                die()

            self.postprocess = post_then_die
        return real_run(self, model)

    Evaluator.run = run
elif point == "save":
    real_save = torch.save

    def save(obj, f, *a, **k):
        if not due():
            return real_save(obj, f, *a, **k)
        buf = io.BytesIO()
        real_save(obj, buf, *a, **k)
        f.write(buf.getvalue()[: len(buf.getvalue()) // 2])
        f.flush()
        die()

    torch.save = save
elif point != "none":
    raise SystemExit(f"unknown kill point {point!r}: step, eval, save or none")

if os.environ.get("TEXTDET_TEST_SEEN"):
    folder = os.environ["TEXTDET_TEST_SEEN"]
    os.makedirs(folder, exist_ok=True)
    record = os.path.join(folder, f"rank{os.environ.get('RANK', '0')}.txt")
    real_getitem, real_train_step = DetDataset.__getitem__, Trainer.train_step

    def getitem(self, key):
        epoch, index = key if isinstance(key, tuple) else (0, key)
        return {**real_getitem(self, key), "_epoch": epoch, "_index": index}

    def train_step(self, batch, sync):
        with open(record, "a") as f:
            f.writelines(f"{e} {self.global_step} {i}\n" for e, i in zip(batch["_epoch"], batch["_index"], strict=True))
        return real_train_step(self, batch, sync)

    DetDataset.__getitem__ = getitem
    Trainer.train_step = train_step
sys.exit(main(["train", *args]))
