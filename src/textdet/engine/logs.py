"""Run logging: MindOCR-style lines to stdout and ``train.log``, ``metrics.jsonl``, optional TensorBoard."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from dataclasses import dataclass, field

import torch

LOGGER_NAME = "textdet"


def setup_logging(run_dir: str | None, main_process: bool, level: int = logging.INFO) -> logging.Logger:
    """``[YYYY-mm-dd HH:MM:SS] textdet INFO - msg`` on stdout (rank 0) and in ``run_dir/train.log``."""
    logger = logging.getLogger(LOGGER_NAME)
    logger.setLevel(level)
    for h in list(logger.handlers):
        logger.removeHandler(h)
        h.close()
    fmt = logging.Formatter("[%(asctime)s] %(name)s %(levelname)s - %(message)s", "%Y-%m-%d %H:%M:%S")
    if main_process:
        out = logging.StreamHandler(sys.stdout)
        out.setFormatter(fmt)
        logger.addHandler(out)
        if run_dir:
            os.makedirs(run_dir, exist_ok=True)
            fh = logging.FileHandler(os.path.join(run_dir, "train.log"), encoding="utf-8")
            fh.setFormatter(fmt)
            logger.addHandler(fh)
    else:
        logger.addHandler(logging.NullHandler())
    return logger


class MetricsWriter:
    """One JSON object per epoch in ``metrics.jsonl``, mirrored to TensorBoard when it is installed."""

    def __init__(self, run_dir: str, tensorboard: bool = True):
        self.path = os.path.join(run_dir, "metrics.jsonl")
        self.tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter  # optional extra

                self.tb = SummaryWriter(os.path.join(run_dir, "tensorboard"))
            except Exception:  # tensorboard not installed: the jsonl file is the record
                self.tb = None

    def write(self, record: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        if self.tb is not None:
            for k, v in record.items():
                if isinstance(v, (int, float)) and k != "epoch":
                    self.tb.add_scalar(k, v, record["epoch"])
            self.tb.flush()

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()


@dataclass
class EpochStats:
    """Sums over an epoch (or a log window); loss terms stay on the device until read."""

    steps: int = 0
    bad: int = 0  # micro-batches of skipped (non-finite) optimizer steps: not in the loss means
    images: int = 0
    wait: float = 0.0
    start: float = field(default_factory=time.perf_counter)
    terms: dict[str, torch.Tensor] = field(default_factory=dict)

    def add(self, losses: dict[str, torch.Tensor], n_images: int, wait: float, bad: bool = False) -> None:
        self.steps += 1
        self.bad += bad
        self.images += n_images
        self.wait += wait
        for k, v in losses.items() if not bad else ():
            v = v.detach()
            self.terms[k] = self.terms[k] + v if k in self.terms else v.clone()

    def summary(self) -> dict[str, float]:
        elapsed = time.perf_counter() - self.start
        out = {k: float(v) / max(self.steps - self.bad, 1) for k, v in self.terms.items()}
        out.update(time=elapsed, step_ms=1000 * elapsed / max(self.steps, 1),
                   img_per_s=self.images / max(elapsed, 1e-9), data_wait_s=self.wait,
                   data_wait_share=self.wait / max(elapsed, 1e-9),
                   compute_s=max(elapsed - self.wait, 0.0))
        return out
