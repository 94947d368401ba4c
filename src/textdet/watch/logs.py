"""What a run tells its user: MindOCR-style lines to stdout and ``train.log``, the start banner, the input-bound /
compute-bound verdict, ``metrics.jsonl`` and optional TensorBoard."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys

from textdet.watch.phases import PHASES, phase_advice
from textdet.watch.tboard import truncate_events

LOGGER_NAME = "textdet"


def setup_logging(run_dir: str | None, main_process: bool, level: int = logging.INFO) -> logging.Logger:
    """``[YYYY-mm-dd HH:MM:SS] textdet INFO - msg`` on stdout (rank 0) and in ``run_dir/train.log``."""
    logger = logging.getLogger(LOGGER_NAME)
    logger.setLevel(level)
    for h in list(logger.handlers):
        logger.removeHandler(h)
        h.close()
    fmt = logging.Formatter("[%(asctime)s] %(name)s %(levelname)s - %(message)s", "%Y-%m-%d %H:%M:%S")
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stdout)] if main_process else []
    if main_process and run_dir:
        os.makedirs(run_dir, exist_ok=True)
        handlers.append(logging.FileHandler(os.path.join(run_dir, "train.log"), encoding="utf-8"))
    for h in handlers or [logging.NullHandler()]:
        h.setFormatter(fmt)
        logger.addHandler(h)
    return logger


class MetricsWriter:
    """One JSON object per epoch in ``metrics.jsonl``, mirrored to TensorBoard when it is installed, where every
    scalar's x axis is the optimizer step (per-step scalars every ``log_interval``, epoch records at the epoch's
    last step). ``resumed_step``: events after that step, written before a resume, are removed first."""

    def __init__(self, run_dir: str, tensorboard: bool = True, resumed_step: int | None = None):
        self.path = os.path.join(run_dir, "metrics.jsonl")
        self.tb = None
        if tensorboard:
            with contextlib.suppress(ImportError):  # tensorboard not installed: the jsonl file is the record
                from torch.utils.tensorboard import SummaryWriter  # optional extra

                tb_dir = os.path.join(run_dir, "tensorboard")
                if resumed_step is not None:
                    truncate_events(tb_dir, resumed_step)
                self.tb = SummaryWriter(tb_dir)

    def write(self, record: dict, step: int) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        self.write_scalars(record, step)

    def write_scalars(self, scalars: dict, step: int, prefix: str = "") -> None:
        """Numbers (and one level of nested dicts, as ``phase_ms/forward``) to TensorBoard at ``step``."""
        if self.tb is None:
            return
        for key, value in scalars.items():
            if isinstance(value, dict):
                self.write_scalars(value, step, f"{prefix}{key}/")
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                self.tb.add_scalar(prefix + key, value, step)
        self.tb.flush()

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()


def banner(rows: list[tuple[str, object]]) -> str:
    """MindOCR's start-of-training summary: its "Key: value" lines (greppable alike) between two rules."""
    line = "=" * 80
    body = "\n".join(f"{key}: {value}" for key, value in rows)
    return f"\n{line}\n{body}\n{line}\n{'Start training... (The first epoch takes longer, please wait...)'}"


def throughput_verdict(summary: dict, workers: int, batch_size: int, phases: dict | None = None) -> str:
    """Input-bound or compute-bound, with the figures behind it and what to change; ``workers``: the train
    loader's ``num_workers``; ``phases`` (the epoch's mean sampled step, seconds per phase) adds what its
    largest phases suggest."""
    verdict = _bound_verdict(summary, workers, batch_size)
    advice = phase_advice(phases) if phases else []
    if phases:
        total = sum(phases.values())
        shares = ", ".join(f"{name} {100 * phases[name] / max(total, 1e-12):.0f}%" for name in PHASES)
        verdict += f"\n  sampled step: {shares}"
    return verdict + "".join(f"\n  - {line}" for line in advice)


def _bound_verdict(summary: dict, workers: int, batch_size: int) -> str:
    elapsed, wait = summary["time"], summary["data_wait_s"]
    images = summary["img_per_s"] * elapsed
    share = summary["data_wait_share"]
    model_rate = images / max(elapsed - wait, 1e-9)
    loader_rate = summary["img_per_s"]
    cores = os.cpu_count() or 1
    if share > 0.10:
        # No workers: loading ran in this process, its rate is images / seconds spent loading.
        per_worker = loader_rate / workers if workers else images / max(wait, 1e-9)
        more = max(min(cores, workers * 2 if workers else cores), 1)
        expect = min(per_worker * more, model_rate)
        return (f"verdict: INPUT-BOUND — the step waited for data {100 * share:.0f}% of the time. The loader gives "
                f"{loader_rate:.1f} img/s, the model could take {model_rate:.1f} img/s. With {workers} worker(s) on "
                f"{cores} core(s) (~{per_worker:.1f} img/s per loading process) expect up to ~{expect:.1f} img/s at "
                f"num_workers={more}. Options: -o train.loader.num_workers={more}, a smaller crop_size, fewer "
                f"RandomScale upscales, or `textdet bench data -c CFG` to see which transform costs most.")
    return (f"verdict: COMPUTE-BOUND — data wait is {100 * share:.0f}% of the step; the model runs at "
            f"{model_rate:.1f} img/s (batch {batch_size}). To go faster: amp_level O1/O2 on a GPU "
            "(-o system.amp_level=O2), compiled mode on CUDA (system.mode 0), a larger batch, or more devices "
            "(torchrun).")
