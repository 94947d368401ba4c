"""Start-up breakdown: seconds per stage from process start to the first finished step, printed and written to
``startup.json`` (a user once waited an hour for a graph compile with nothing saying where the time went).
Torch-free: the CLI starts the timer before ``import torch``, whose seconds are a stage of their own."""

from __future__ import annotations

import json
import logging
import os
import time

logger = logging.getLogger("textdet")


def process_start_time() -> float:
    """Wall-clock time at which this process started (Linux /proc), else the time of this import."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return time.time() - uptime + start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return _IMPORT_TIME


_IMPORT_TIME = time.time()


class StartupTimer:
    """Records consecutive stages; ``mark(name)`` closes the stage that ran since the last mark."""

    def __init__(self, t0: float | None = None):
        self.t0 = process_start_time() if t0 is None else t0
        self.last = self.t0
        self.stages: dict[str, float] = {}
        self.totals: dict[str, float] = {}

    def mark(self, name: str, return_stage: bool = False) -> float:
        """Close stage ``name``; returns seconds since process start (or the stage's own seconds)."""
        now = time.time()
        stage = now - self.last
        self.stages[name] = self.stages.get(name, 0.0) + stage
        self.last = now
        return stage if return_stage else now - self.t0

    def total(self, name: str) -> None:
        """Record the time from process start to now under ``name`` (e.g. total_to_first_step)."""
        self.totals[name] = time.time() - self.t0

    def table(self) -> str:
        width = max(len(k) for k in [*self.stages, *self.totals, "stage"])
        rows = [f"{'stage':<{width}}  seconds", f"{'-' * width}  -------"]
        rows += [f"{k:<{width}}  {v:7.2f}" for k, v in {**self.stages, **self.totals}.items()]
        return "\n".join(rows)

    def write(self, path: str) -> None:
        """``startup.json``: {"stages": {name: seconds}, total name: seconds, ...}."""
        data = {"stages": {k: round(v, 4) for k, v in self.stages.items()},
                **{k: round(v, 4) for k, v in self.totals.items()}}
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
