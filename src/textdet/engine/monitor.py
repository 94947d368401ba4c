"""The instruments a training run carries besides its loop: ETA, the sampled phase breakdown, the profiler window,
per-step TensorBoard scalars and the hang watchdog, behind a few hooks so ``Trainer.fit`` stays one page."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator

from textdet.engine.eta import Eta, clock
from textdet.engine.phases import phase_ms, phase_text
from textdet.engine.profiling import StepProfiler
from textdet.engine.watchdog import Watchdog

logger = logging.getLogger("textdet")


class RunMonitor:
    """Built by ``Trainer.fit`` (``t``: the trainer; ``writer``: rank 0's MetricsWriter or None); starts the
    hang watchdog's thread."""

    def __init__(self, t, writer):
        self.phases = t.phases
        self.writer = writer
        self.watchdog = Watchdog(t.cfg.train.step_timeout, t.dist.rank, t.dist.world_size, t.phases)
        system = t.cfg.system
        self.log_interval = system.log_interval
        self.eta = Eta(t.steps_per_epoch, t.cfg.scheduler.num_epochs, t.eval_due)
        self.profiler = None
        if t.profile_window is not None:
            out_dir = os.path.join(t.run_dir, "profile")
            self.profiler = StepProfiler(t.profile_window, out_dir, t.dist.rank, t.main, t.device)
        self.run_steps = 0  # micro-steps of this process (the profiler window counts these)

    def epoch_begins(self) -> None:
        self.eta.epoch_begins()

    def before_step(self, step: int) -> None:
        """``step``: the 0-based micro-step in the epoch; the one before each step line is sampled."""
        if (step + 1) % self.log_interval == 0:
            self.phases.arm()

    def after_step(self, batches, window_done: bool) -> None:
        """After each micro-step: phases, ETA, profiler window, watchdog heartbeat."""
        self.phases.end_step(batches.wait, batches.copy_seconds, window_done)
        self.eta.step_done()
        self.run_steps += 1
        if self.profiler is not None:
            self.profiler.step()
        if self.watchdog is not None:
            self.watchdog.beat(self.run_steps, self.eta.step_seconds())

    def bar_text(self, epoch: int, step: int) -> str:
        """The progress bar's postfix: the run's remaining time (tqdm shows the epoch's)."""
        left = self.eta.remaining(epoch, step)
        return f"run eta {clock(left[1])}" if left else ""

    def step_line_tail(self, epoch: int, step: int) -> str:
        """ETA and, when a sample finished since the last line, its phases."""
        text = self.eta.text(epoch, step)
        sample = self.phases.take()
        self.last_sample = sample
        return f"{text}, {phase_text(sample)}" if sample else text

    def step_scalars(self, scalars: dict, global_step: int) -> None:
        """Per-step TensorBoard scalars (rank 0), with the phases of the sample the step line printed."""
        if self.writer is None:
            return
        sample = getattr(self, "last_sample", None)
        if sample:
            scalars = {**scalars, "phase_ms": phase_ms(sample)}
        self.writer.write_scalars(scalars, global_step, prefix="step/")

    @contextlib.contextmanager
    def timed(self, what: str) -> Iterator[dict]:
        """Evaluation or checkpoint writing: the watchdog knows it is not a step; ``out["seconds"]`` after."""
        out: dict = {}
        self.phases.enter(what)
        if self.watchdog is not None:
            self.watchdog.between_steps(True)
        start = time.perf_counter()
        try:
            yield out
        finally:
            out["seconds"] = time.perf_counter() - start
            if self.watchdog is not None:
                self.watchdog.between_steps(False)
            self.phases.enter("data wait")
        if what == "checkpoint":
            self.eta.last_ckpt_s = out["seconds"]

    def failed(self, err: BaseException) -> None:
        """This process stops with ``err``: the other ranks hear why before it exits."""
        if self.watchdog is not None:
            self.watchdog.report_failure(err)

    def close(self) -> None:
        if self.profiler is not None:
            self.profiler.close()
            self.profiler = None
        if self.watchdog is not None:
            self.watchdog.stop()
