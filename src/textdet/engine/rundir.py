"""Run folders: one run per folder, so ``metrics.jsonl`` and ``e{N}.ckpt`` never mix two runs. Torch-free: the CLI
checks the folder before the seconds spent importing torch."""

from __future__ import annotations

import json
import os
import re
import shutil

from textdet.errors import ConfigError

# What a run leaves: checkpoints and metrics mark "another run"; logs alone are a run killed at start-up.
_RESULTS = re.compile(r"(metrics\.jsonl|train_resume\.ckpt|best\.ckpt|e\d+\.ckpt)$")
_TRACES = ("train.log", "startup.json", "train_config.yaml", "tensorboard", "profile")


def prepare_run_dir(run_dir: str, resuming: bool, overwrite: bool = False) -> None:
    """Refuse a fresh run into a folder with another run's results (``overwrite`` clears them); resuming keeps all."""
    if not os.path.isdir(run_dir):
        return
    for f in os.listdir(run_dir):  # a write cut by a kill
        if f.startswith(".tmp_") and f.endswith(".ckpt"):
            os.remove(os.path.join(run_dir, f))
    if resuming:
        return
    results = sorted(f for f in os.listdir(run_dir) if _RESULTS.match(f))
    if results and not overwrite:
        shown = ", ".join(results[:4])
        if len(results) > 4:
            shown += ", ..."
        raise ConfigError(
            f"train.ckpt_save_dir {run_dir} holds another run ({shown}); a fresh run would mix with it. "
            "Either continue that run (-o model.resume=True), write to another folder "
            "(-o train.ckpt_save_dir=NEW), or replace it (--overwrite)")
    traces = [t for t in _TRACES if os.path.exists(os.path.join(run_dir, t))]
    for name in results + traces:
        path = os.path.join(run_dir, name)
        if os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.remove(path)


def trim_metrics(run_dir: str, epochs_done: int) -> None:
    """On resume, drop ``metrics.jsonl`` records of epochs the checkpoint does not hold (the run redoes them)."""
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.isfile(path):
        return
    with open(path, encoding="utf-8") as f:
        lines = [line for line in f if _kept(line, epochs_done)]
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)


def _kept(line: str, epochs_done: int) -> bool:
    """A record of an epoch the checkpoint holds; a line cut by a kill is dropped."""
    try:
        epoch = int(json.loads(line)["epoch"])
    except (ValueError, KeyError, TypeError):
        return False
    return epoch <= epochs_done
