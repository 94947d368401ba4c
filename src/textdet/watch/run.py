"""The watch of a training run: the one interface the loop calls, at named events (detectron2's hook names:
before and after training, an epoch, a step, an evaluation). Behind it sit the progress bar and step lines,
the ETA, the sampled phase breakdown, the start-up report, the profiler window, metrics.jsonl and TensorBoard,
the health checks and the hang watchdog. Events take plain values (steps, losses, timings, a record), never
the trainer (docs/decisions/watching-a-run.md)."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from textdet.runtime.evaluator import progress_bar
from textdet.watch.eta import Eta, clock
from textdet.watch.health import BlankMapWatch, check_bad_run
from textdet.watch.logs import MetricsWriter, throughput_verdict
from textdet.watch.phases import StepPhases, phase_ms, phase_text
from textdet.watch.profiling import StepProfiler
from textdet.watch.startup import StartupTimer
from textdet.watch.startup_report import StartupReport
from textdet.watch.stats import EpochStats as EpochStats  # the loop sums its epoch with it
from textdet.watch.watchdog import Watchdog

logger = logging.getLogger("textdet")


@dataclass
class WatchSettings:
    """What the watch knows of a run, read from the config by ``textdet.build.training``."""

    run_dir: str
    main: bool  # this process writes the run folder's files and prints (rank 0)
    rank: int
    world_size: int
    device: torch.device
    steps_per_epoch: int  # micro-steps
    num_epochs: int
    accum: int  # micro-steps per optimizer step (train.gradient_accumulation_steps)
    batch_size: int  # per process
    workers: int  # train.loader.num_workers, for the bottleneck verdict's advice
    log_interval: int  # a step line every this many micro-steps (system.log_interval)
    progress: bool  # progress bars
    step_timeout: float | str  # train.step_timeout: the hang watchdog's allowance
    max_bad_steps: int  # train.max_bad_steps
    max_blank_steps: int  # train.max_blank_steps
    binary_thresh: float | None  # postprocess.binary_thresh: what the blank-map watch counts as marked
    lr: float  # scheduler.lr, for the blank-map advice
    compiled: bool  # the first step includes a compile
    profile_window: tuple[int, int] | None = None  # --profile START:STOP


@dataclass
class StepReport:
    """One finished micro-step as the loop saw it."""

    epoch: int  # 0-based
    step: int  # 1-based micro-step in the epoch
    data_wait: float  # seconds the step waited for its batch
    # the batch's copy time (on an accelerator it synchronises: read when sampled)
    copy_seconds: Callable[[], float]
    prob: Tensor  # the probability map, detached (N, 1, H, W)
    batch: dict  # the batch on the device: the blank-map watch reads its binary_map and mask
    # the micro-steps this step's optimizer step counted, as (losses, images, data wait); empty in
    # mid-accumulation
    stepped: list[tuple[dict[str, Tensor], int, float]]
    bad: bool  # the optimizer step was skipped: a non-finite loss or gradient
    bad_run: int  # skipped optimizer steps in a row
    backing_off: bool  # fp16 loss scaling may still recover from them
    lr: float
    loss_scale: float
    global_step: int  # optimizer steps done, the x axis of TensorBoard's scalars


class RunWatch:
    """Built before the loop (``startup``: the start-up timer the build marked its stages on; ``banner``:
    the start-of-training summary; ``eval_due(epoch)``: whether that 1-based epoch ends with an evaluation,
    for the ETA). ``before_train`` starts the hang watchdog's thread and the profiler; ``close`` stops
    them."""

    def __init__(self, settings: WatchSettings, startup: StartupTimer, banner: str,
                 eval_due: Callable[[int], bool]) -> None:
        self.settings = settings
        self.banner = banner
        self.eval_due = eval_due
        self.phases = StepPhases(settings.device)
        self.startup_report = StartupReport(startup, settings.device, settings.compiled, settings.main,
                                            settings.run_dir)
        self.blank_watch = BlankMapWatch(settings.max_blank_steps, settings.binary_thresh, settings.lr,
                                         settings.run_dir)
        self.writer: MetricsWriter | None = None
        self.watchdog: Watchdog | None = None
        self.profiler: StepProfiler | None = None
        self.eta = Eta(settings.steps_per_epoch, settings.num_epochs, eval_due)
        self.bar = progress_bar(False, 0, "")
        self.window = EpochStats()  # since the last step line
        self.last_sample: dict[str, float] | None = None  # the phases the last step line printed
        self.epoch_phases: dict[str, float] | None = None  # the epoch's mean sampled step
        self.global_step = 0  # optimizer steps, the x axis of TensorBoard's scalars
        self.run_steps = 0  # micro-steps of this process (the profiler window counts these)
        self.epochs_run = 0  # epochs of this process (a resumed run counts from its first)

    # ----------------------------------------------------------------------------------------------- training
    def before_train(self, resumed_step: int | None) -> None:
        """``resumed_step``: the optimizer step a resumed run starts from (TensorBoard events after it,
        written before the resume, are removed), None for a fresh run."""
        settings = self.settings
        if settings.main:
            logger.info(self.banner)
            self.writer = MetricsWriter(settings.run_dir, resumed_step=resumed_step)
        self.global_step = resumed_step or 0
        self.watchdog = Watchdog(settings.step_timeout, settings.rank, settings.world_size, self.phases)
        if settings.profile_window is not None:
            out_dir = os.path.join(settings.run_dir, "profile")
            self.profiler = StepProfiler(settings.profile_window, out_dir, settings.rank, settings.main,
                                         settings.device)
        self.eta = Eta(settings.steps_per_epoch, settings.num_epochs, self.eval_due)

    def after_train(self) -> None:
        if self.writer is not None:  # rank 0 only
            self.writer.close()
            logger.info("run folder: %s", os.path.abspath(self.settings.run_dir))

    def failed(self, err: BaseException) -> None:
        """This process stops with ``err``: the other ranks hear why before it exits."""
        if self.watchdog is not None:
            self.watchdog.report_failure(err)

    def close(self) -> None:
        """Stop the profiler (a run shorter than its window writes what it recorded) and the watchdog."""
        if self.profiler is not None:
            self.profiler.close()
            self.profiler = None
        if self.watchdog is not None:
            self.watchdog.stop()
            self.watchdog = None

    # ------------------------------------------------------------------------------------------------ epochs
    def before_epoch(self, epoch: int) -> None:
        settings = self.settings
        self.eta.epoch_begins()
        label = f"epoch {epoch + 1}/{settings.num_epochs}"
        self.bar = progress_bar(settings.progress and settings.main, settings.steps_per_epoch, label)
        self.window = EpochStats()

    def after_epoch(self, record: dict, summary: dict, steps: int, skipped_samples: int) -> None:
        """The epoch's steps are done (its evaluation comes next): ``record``: the loop's epoch record;
        ``summary``: its ``EpochStats.summary()``; ``steps``: micro-steps run; ``skipped_samples``: samples
        the loader could not use and replaced."""
        settings = self.settings
        self.bar.close()
        if skipped_samples:
            logger.warning("epoch %d: %d sample(s) could not be used and were replaced (see the warnings "
                           "above, or run `textdet check-data -c CFG`)", record["epoch"], skipped_samples)
        self.epoch_phases = self.phases.take_epoch()
        logger.info("epoch: [%d/%d], loss: %.6f, epoch time: %.3f s, per step time: %.3f ms, fps per card: "
                    "%.2f img/s, data wait: %.1f%%, skipped steps (non-finite): %d", record["epoch"],
                    settings.num_epochs, record.get("loss", float("nan")), summary["time"],
                    summary["step_ms"], summary["img_per_s"], 100 * summary["data_wait_share"],
                    record["skipped_steps"])
        first = self.epochs_run == 0
        if first:
            self.startup_report.first_epoch_done(summary["time"], steps)
        if first or record["epoch"] == settings.num_epochs:
            logger.info(throughput_verdict(summary, settings.workers, settings.batch_size, self.epoch_phases))
        self.epochs_run += 1

    def after_eval(self, record: dict, global_step: int) -> None:
        """After the epoch's evaluation (or where it would be): ``record``, with the scores when one ran, goes
        to metrics.jsonl and TensorBoard, with the epoch's sampled phases."""
        self.global_step = global_step
        if "eval_time" in record:
            self.eta.last_eval_s = record["eval_time"]
        if self.writer is None:
            return
        if self.epoch_phases:
            record = {**record, "phase_ms": phase_ms(self.epoch_phases)}
        self.writer.write(record, global_step)

    @contextlib.contextmanager
    def timed(self, what: str, epoch_end: bool = False) -> Iterator[None]:
        """Evaluation or a checkpoint write: the watchdog knows it is not a step, the ETA learns its cost;
        ``epoch_end``: the epoch's checkpoints, whose time is logged."""
        self.phases.enter(what)
        if self.watchdog is not None:
            self.watchdog.between_steps(True)
        start = time.perf_counter()
        try:
            yield
        finally:
            seconds = time.perf_counter() - start
            if self.watchdog is not None:
                self.watchdog.between_steps(False)
            self.phases.enter("data wait")
        if what == "checkpoint":
            self.eta.last_ckpt_s = seconds
        if epoch_end:
            logger.info("checkpoints written in %.3f s", seconds)
            if self.writer is not None:
                self.writer.write_scalars({"ckpt_time": seconds}, self.global_step)

    # ------------------------------------------------------------------------------------------------ steps
    def before_step(self, step: int) -> None:
        """``step``: the 0-based micro-step in the epoch; the one before each step line is sampled."""
        if self.run_steps == 0:
            self.startup_report.first_batch_ready()
        if (step + 1) % self.settings.log_interval == 0:
            self.phases.arm()

    def phase(self, name: str) -> None:
        """The step moves to phase ``name`` (forward, loss, backward, optimizer): the sampled breakdown closes
        the previous one, the hang watchdog reports where a stuck step is."""
        self.phases.enter(name)

    def after_step(self, report: StepReport) -> None:
        """After each micro-step: health checks, phases, ETA, profiler, watchdog, progress bar, step line."""
        for losses, images, wait in report.stepped:
            self.window.add(losses, images, wait, bad=report.bad)
        if report.bad:
            check_bad_run(report.bad_run, report.epoch, report.step, self.settings.max_bad_steps,
                          report.backing_off, self.settings.run_dir)
        self.blank_watch.add_step(report.prob, report.batch)
        self.phases.end_step(report.data_wait, report.copy_seconds, bool(report.stepped))
        self.eta.step_done()
        self.run_steps += 1
        if self.profiler is not None:
            self.profiler.step()
        if self.watchdog is not None:
            self.watchdog.beat(self.run_steps, self.eta.step_seconds())
        if self.run_steps == 1:
            self.startup_report.first_step_done()
        left = self.eta.remaining(report.epoch, report.step)
        self.bar.set_postfix_str(f"run eta {clock(left[1])}" if left else "", refresh=False)
        self.bar.update(1)
        if report.step % self.settings.log_interval == 0:
            self._step_line(report)
            self.window = EpochStats()
            self.blank_watch.check(report.epoch, report.step)

    def _step_line(self, report: StepReport) -> None:
        """The log line and TensorBoard scalars of the last ``log_interval`` micro-steps."""
        settings = self.settings
        summary = self.window.summary()
        skipped = self.window.bad // settings.accum
        wait_ms = 1000 * summary["data_wait_s"] / max(self.window.steps, 1)
        tail = self.eta.text(report.epoch, report.step)
        self.last_sample = self.phases.take()  # None when no sampled step finished since the last line
        if self.last_sample:
            tail = f"{tail}, {phase_text(self.last_sample)}"
        logger.info(
            "epoch: [%d/%d] step: [%d/%d], loss: %.6f, lr: %.6f, per step time: %.3f ms, fps per card: %.2f "
            "img/s, data wait: %.1f ms, compute: %.1f ms (%.1f%% waiting for data), skipped steps: %d, %s",
            report.epoch + 1, settings.num_epochs, report.step, settings.steps_per_epoch,
            summary.get("loss", float("nan")), report.lr, summary["step_ms"], summary["img_per_s"], wait_ms,
            summary["step_ms"] - wait_ms, 100 * summary["data_wait_share"], skipped, tail)
        if self.writer is None:
            return
        scalars = {term: summary[term] for term in self.window.terms}
        scalars.update(lr=report.lr, img_per_s=summary["img_per_s"],
                       data_wait_share=summary["data_wait_share"], loss_scale=report.loss_scale,
                       skipped_steps=skipped)
        if self.last_sample:
            scalars["phase_ms"] = phase_ms(self.last_sample)
        self.writer.write_scalars(scalars, report.global_step, prefix="step/")
