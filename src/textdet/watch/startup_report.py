"""A training run's start-up report, finished once it trains: the first batch's and first step's times in the
start-up table and ``startup.json``, then the compile time, estimated once the first epoch is timed."""

from __future__ import annotations

import logging
import os

import torch

from textdet.device import synchronize
from textdet.watch.startup import StartupTimer

logger = logging.getLogger("textdet")


class StartupReport:
    """Adds the training stages to ``startup``; the main process logs the table and writes
    ``startup.json``."""

    def __init__(self, startup: StartupTimer, device: torch.device, compiled: bool, main: bool,
                 run_dir: str) -> None:
        self.startup = startup
        self.device = device
        self.compiled = compiled
        self.main = main
        self.path = os.path.join(run_dir, "startup.json")
        self.first_step_s: float | None = None

    def first_batch_ready(self) -> None:
        self.startup.mark("first batch ready")
        self.startup.total("total_to_first_batch")

    def first_step_done(self) -> None:
        """Close the first step once the device has finished it, then log and write the table."""
        synchronize(self.device)
        stage = "first step (includes compile)" if self.compiled else "first step"
        self.first_step_s = self.startup.mark(stage, return_stage=True)
        self.startup.total("total_to_first_step")
        if self.main:
            logger.info("start-up (seconds since process start):\n%s", self.startup.table())
            self.startup.write(self.path)

    def first_epoch_done(self, epoch_s: float, steps: int) -> None:
        """The compile time in the log and startup.json (``compile_report``: how it is estimated)."""
        if not self.compiled:
            return
        report = compile_report(self.first_step_s, epoch_s, steps)
        if report is None:
            return
        seconds, text = report
        self.startup.totals["compile_estimated"] = seconds
        logger.info(text)
        if self.main:
            self.startup.write(self.path)


def compile_report(first_step_s: float, epoch_s: float, steps: int) -> tuple[float, str] | None:
    """Compile time = the first step minus a typical later one (compilation happens inside the first step):
    ``(seconds, log line)``, or None with fewer than 2 steps to compare."""
    if steps < 2:
        return None
    typical = (epoch_s - first_step_s) / (steps - 1)
    compile_s = max(first_step_s - typical, 0.0)
    line = (
        f"torch.compile: about {compile_s:.1f} s "
        f"(first step {first_step_s:.1f} s, later steps {typical:.3f} s each)"
    )
    return compile_s, line
