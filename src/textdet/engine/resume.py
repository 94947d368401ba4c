"""Resuming a run: which checkpoint it resumes from (``find_resume``), when a mid-epoch one is due
(``resume_due``), and where it continues, also when the cluster shape changed (a preempted 8-process job
resumed on 4: ``continue_at``).

The resume checkpoint records the shape it was trained with: processes, per-process batch and gradient
accumulation. The data order of an epoch is one global permutation that the ranks take in turns, so a
mid-epoch checkpoint has used the first ``micro-steps x batch x processes`` samples of it, whatever the shape.
A run of another shape skips those samples and continues at the same fraction of the epoch; the learning-rate
schedule is a function of epochs (optimizer step / optimizer steps per epoch), so it stays where it was by
samples seen (docs/decisions/resume-on-another-cluster-shape.md)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from textdet.errors import ConfigError

logger = logging.getLogger("textdet")

AUTO_INTERVAL_S = 600.0  # train.ckpt_interval_steps: auto writes train_resume.ckpt every 10 minutes


def find_resume(resume: bool | str | None, run_dir: str) -> str | None:
    """``model.resume``: True -> ``run_dir/train_resume.ckpt`` (None when absent: a first run starts fresh),
    a path -> itself, which must exist; None when off."""
    if resume is False or resume is None or resume == "":
        return None
    if resume is True:
        path = os.path.join(run_dir, "train_resume.ckpt")
        if os.path.isfile(path):
            return path
        return None
    path = os.path.expanduser(str(resume))
    if not os.path.isfile(path):
        raise ConfigError(f"model.resume: {resume} does not exist; fix the path, or -o model.resume=True "
                          "for the run folder's train_resume.ckpt")
    return path


def resume_due(interval: int | str, step: int, since_save_s: float) -> bool:
    """Mid-epoch ``train_resume.ckpt`` due? Every N optimizer steps, never (0/off), or every 10 minutes
    (auto)."""
    if interval == "auto":
        return since_save_s >= AUTO_INTERVAL_S
    if interval in (0, "off", False, None):
        return False
    return step % int(interval) == 0


@dataclass(frozen=True)
class RunShape:
    """How one optimizer step is made: ``world_size`` processes x ``batch_size`` samples x ``accumulation``."""

    world_size: int
    batch_size: int
    accumulation: int

    @property
    def samples_per_step(self) -> int:
        """Samples of the data order one optimizer step uses (the global batch)."""
        return self.world_size * self.batch_size * self.accumulation

    def __str__(self) -> str:
        return (f"{self.world_size} process(es) x batch {self.batch_size} x accumulation {self.accumulation} "
                f"= {self.samples_per_step} samples per optimizer step")

    def state_dict(self) -> dict:
        return {"world_size": self.world_size, "batch_size": self.batch_size, "accumulation": self.accumulation}


@dataclass(frozen=True)
class Position:
    """Where training continues: epochs done, micro-steps (per process) into the next one, optimizer steps."""

    epoch: int
    step_in_epoch: int
    global_step: int


def continue_at(ckpt: dict, shape: RunShape, opt_steps_per_epoch: int, path: str) -> Position:
    """The position of this run (``shape``, ``opt_steps_per_epoch`` optimizer steps per epoch) that has seen as many
    samples as the checkpoint; raises ConfigError when no optimizer step of this shape ends there."""
    epoch = int(ckpt.get("epoch", 0))
    step_in_epoch = int(ckpt.get("step_in_epoch", 0))
    saved_shape = ckpt.get("shape")
    if saved_shape is None:  # written before the shape was recorded: taken as this run's
        return Position(epoch, step_in_epoch, int(ckpt.get("step", 0)))
    saved = RunShape(**saved_shape)
    if saved == shape:
        return Position(epoch, step_in_epoch, int(ckpt.get("step", 0)))
    samples = step_in_epoch * saved.batch_size * saved.world_size
    if samples % shape.samples_per_step:
        raise ConfigError(
            f"model.resume: {path} stopped in epoch {epoch + 1} after {samples} samples of its data order, trained as "
            f"{saved}; this run is {shape}, which does not divide {samples}, so it cannot continue at the same "
            f"sample. Resume with a shape whose processes x train.loader.batch_size x "
            f"train.gradient_accumulation_steps divides {samples} (the original: {saved.world_size} x "
            f"{saved.batch_size} x {saved.accumulation}), or train on to an epoch end first")
    steps_done = samples // shape.samples_per_step
    position = Position(epoch, steps_done * shape.accumulation, epoch * opt_steps_per_epoch + steps_done)
    logger.warning("model.resume: %s was trained as %s; this run is %s. Continuing in epoch %d after the same %d "
                   "samples (optimizer step %d of this shape); the learning-rate schedule follows samples seen",
                   path, saved, shape, epoch + 1, samples, position.global_step)
    return position
