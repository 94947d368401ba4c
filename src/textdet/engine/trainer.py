"""The training loop, nanoGPT's way: ``fit()`` and ``train_one_epoch()`` read top to bottom, features
(autocast, loss scaling, ``no_sync`` accumulation, clipping, EMA) are flags, and what watches the run is a
call to ``self.watch`` at named events. ``textdet.build.training.build_trainer`` builds a Trainer from a
config; the Trainer itself reads no config."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from textdet import __version__
from textdet.data.targets import LOSS_COLUMNS
from textdet.engine.ema import ModelEMA
from textdet.engine.finetune import keep_frozen_in_eval_mode
from textdet.engine.optim import load_optimizer_state
from textdet.engine.resume import RunShape, continue_at, resume_due
from textdet.engine.retention import EpochCheckpoints, ranking_score
from textdet.engine.rng import rng_state, set_rng_state
from textdet.engine.rundir import trim_metrics
from textdet.engine.schedule import LRSchedule
from textdet.engine.train_eval import TrainEvaluation
from textdet.runtime import checkpoint, ranks
from textdet.runtime.amp import AmpSettings, LossScaler
from textdet.runtime.feed import DeviceInput, Prefetcher
from textdet.runtime.ranks import DistInfo
from textdet.watch.run import EpochStats, RunWatch, StepReport

logger = logging.getLogger("textdet")


@dataclass
class TrainSettings:
    """The training keys the loop reads, resolved from the config by ``build.training``."""

    run_dir: str  # train.ckpt_save_dir
    num_epochs: int  # scheduler.num_epochs
    accum: int  # train.gradient_accumulation_steps
    clip_grad: bool  # train.clip_grad
    clip_norm: float  # train.clip_norm
    ema_decay: float  # train.ema_decay
    ema_reset_on_resume: bool  # train.ema_resume == "reset": MindOCR rebuilds the EMA with 0 updates
    freeze_bn: bool  # train.freeze_bn
    freeze: list[str]  # train.freeze
    ckpt_interval_steps: int | str  # train.ckpt_interval_steps: mid-epoch resume checkpoints
    indicator: str  # the metric's main indicator, which picks best.ckpt
    config: dict  # the resolved config, saved in every checkpoint


@dataclass
class TrainParts:
    """What a run is built from (``build.training``)."""

    device: torch.device
    dist: DistInfo
    model: nn.Module  # the raw module: checkpoints and EMA read it
    forward_model: nn.Module  # the model the step runs: DDP-wrapped under torchrun
    loss_step: Callable  # ForwardAndLoss over forward_model, compiled when ``compiled``
    compiled: bool
    amp: AmpSettings
    scaler: LossScaler
    optimizer: Future | torch.optim.Optimizer  # built in a thread: a Future until first used
    schedule: LRSchedule
    ema: ModelEMA | None
    train_loader: torch.utils.data.DataLoader
    early_batches: Iterator | None  # the first epoch's batches, whose workers started during the build
    feed: DeviceInput
    evaluation: TrainEvaluation | None
    epoch_checkpoints: EpochCheckpoints


class Trainer:
    """Trains ``parts`` per ``settings``, reporting to ``watch``; ``resume_path``: a train_resume.ckpt to
    continue from (None: a fresh run)."""

    def __init__(self, parts: TrainParts, settings: TrainSettings, watch: RunWatch,
                 resume_path: str | None = None) -> None:
        self.settings = settings
        self.watch = watch
        self.device = parts.device
        self.dist = parts.dist
        self.main = ranks.is_main()
        self.run_dir = settings.run_dir
        self.model = parts.model
        self.forward_model = parts.forward_model
        self.loss_step = parts.loss_step
        self.compiled = parts.compiled
        self.amp = parts.amp
        self.scaler = parts.scaler
        self._optimizer = parts.optimizer
        self.schedule = parts.schedule
        self.ema = parts.ema
        self.train_loader = parts.train_loader
        self.early_batches = parts.early_batches
        self.feed = parts.feed
        self.evaluation = parts.evaluation
        self.epoch_ckpts = parts.epoch_checkpoints
        self.accum = settings.accum
        self.steps_per_epoch = len(self.train_loader)  # micro-batches
        self.opt_steps_per_epoch = self.steps_per_epoch // self.accum
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        # BatchNorm statistics after the last good step: a skipped (non-finite) step puts them back.
        self.buffers = [b for b in self.model.buffers() if b.is_floating_point()]
        self.good_buffers = [b.clone() for b in self.buffers]
        self.bad_run = 0  # consecutive skipped optimizer steps
        self.epoch = 0  # epochs done
        self.step_in_epoch = 0  # micro-steps done in the next epoch (a mid-epoch resume)
        self.global_step = 0  # optimizer steps done
        self.best = -math.inf  # best score so far (the main indicator, or -loss without evaluation)
        self.last_save_t = time.perf_counter()
        self.resumed_step: int | None = None
        if resume_path:
            self._resume(resume_path)
            self.resumed_step = self.global_step

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """Built in a thread (``optim.build_optimizer_in_background``): the first use waits for it."""
        if not isinstance(self._optimizer, torch.optim.Optimizer):
            self._optimizer = self._optimizer.result()
        return self._optimizer

    def _resume(self, path: str) -> None:
        """Weights, optimizer, scaler, EMA, kept epochs, position, best score and RNGs from
        train_resume.ckpt."""
        saved = checkpoint.load_checkpoint(path, "model.resume")
        self.model.load_state_dict(checkpoint.model_state(saved))
        if saved.get("optimizer"):
            load_optimizer_state(self.optimizer, saved["optimizer"], path)
        for key, part in (("scaler", self.scaler), ("ema", self.ema), ("epoch_ckpts", self.epoch_ckpts)):
            if part is not None and saved.get(key):
                part.load_state_dict(saved[key])
        if self.ema is not None and self.settings.ema_reset_on_resume:
            self.ema = ModelEMA(self.model, self.settings.ema_decay)
        position = continue_at(saved, self.run_shape(), self.opt_steps_per_epoch, path)
        self.epoch = position.epoch
        self.step_in_epoch = position.step_in_epoch
        self.global_step = position.global_step
        self.best = float(saved.get("best_metric", -math.inf))
        if "rng" in saved:
            set_rng_state(saved["rng"])
        # the BatchNorm statistics a skipped step puts back are the loaded ones, not those of the initialisation
        torch._foreach_copy_(self.good_buffers, self.buffers)
        if self.main:
            trim_metrics(self.run_dir, self.epoch)
        logger.info("resumed from %s: epoch %d done (+%d micro-steps), step %d, best %s %.4f", path, self.epoch,
                    self.step_in_epoch, self.global_step, self.settings.indicator, self.best)

    def run_shape(self) -> RunShape:
        """Processes x per-process batch x accumulation: saved for a resume on another cluster shape."""
        return RunShape(self.dist.world_size, self.train_loader.batch_size, self.accum)

    # ----------------------------------------------------------------------------------------- the loop
    def fit(self) -> dict:
        """Train the epochs left; returns the last epoch's record (losses, speed and, when evaluated,
        scores)."""
        num_epochs = self.settings.num_epochs
        self.watch.before_train(self.resumed_step)
        record: dict = {}
        try:
            for epoch in range(self.epoch, num_epochs):
                stats = self.train_one_epoch(epoch)
                summary = stats.summary()
                record = self.epoch_record(epoch, stats, summary)
                self.watch.after_epoch(record, summary, stats.steps, stats.skipped_samples)
                with self.watch.timed("evaluation"):
                    perf, kept_model, thresholds = self.evaluate(epoch + 1)
                record.update(perf)
                # metrics.jsonl before the checkpoint: a kill in between leaves a record that resume trims
                self.watch.after_eval(record, self.global_step)
                with self.watch.timed("checkpoint", epoch_end=True):
                    self.save(epoch + 1, perf.get(self.settings.indicator), record.get("loss"), kept_model,
                              thresholds)
            self.watch.after_train()
            ranks.barrier()
        except BaseException as err:
            self.watch.failed(err)
            raise
        finally:
            self.watch.close()
        return record

    def train_one_epoch(self, epoch: int) -> EpochStats:
        start = self.step_in_epoch if epoch == self.epoch else 0  # micro-steps a mid-epoch resume skips
        self.train_loader.sampler.set_epoch(epoch, skip=start * self.train_loader.batch_size * self.dist.world_size)
        # The build started the first epoch's workers while the model was built: use them once.
        source = self.train_loader
        if epoch == 0 and self.early_batches is not None:
            source = self.early_batches
        self.early_batches = None
        self.forward_model.train()
        keep_frozen_in_eval_mode(self.model, self.settings.freeze_bn, self.settings.freeze)
        stats = EpochStats()
        usable = self.opt_steps_per_epoch * self.accum  # a trailing partial accumulation is not stepped
        pending: list = []  # (losses, images, wait) of this accumulation window, counted once it is stepped
        batches = Prefetcher(source, self.feed)
        self.model.zero_grad(set_to_none=True)  # not the optimizer's: it may still be in the making
        self.watch.before_epoch(epoch)
        for i, batch in enumerate(batches, start):
            if i >= usable:
                break
            stats.skipped_samples += batch.get("_skipped", 0)
            last_micro = (i + 1) % self.accum == 0
            self.watch.before_step(i)
            losses, prob = self.train_step(batch, sync=last_micro)
            pending.append((losses, batch["image"].shape[0], batches.wait))
            stepped = []  # the micro-steps this step's optimizer step counts (none in mid-accumulation)
            bad = False
            if last_micro:
                self.watch.phase("optimizer")
                bad = self.optimizer_step()
                for item in pending:
                    stats.add(*item, bad=bad)
                stepped = pending
                pending = []
                since_save = time.perf_counter() - self.last_save_t
                if not bad and i + 1 < usable and resume_due(self.settings.ckpt_interval_steps,
                                                             self.global_step, since_save):
                    with self.watch.timed("checkpoint"):
                        self.save_resume(epoch, i + 1)
            self.watch.after_step(StepReport(
                epoch=epoch, step=i + 1, data_wait=batches.wait, copy_seconds=batches.copy_seconds, prob=prob,
                batch=batch, stepped=stepped, bad=bad, bad_run=self.bad_run,
                backing_off=self.scaler.backing_off(), lr=self.schedule(max(self.global_step - 1, 0)),
                loss_scale=self.scaler.scale, global_step=self.global_step))
        return stats

    def train_step(self, batch: dict, sync: bool) -> tuple[dict[str, Tensor], Tensor]:
        """Forward, loss and backward of one micro-batch, gradients synced only on the last one of an
        accumulation window: the loss terms and the probability map (detached)."""
        no_sync = contextlib.nullcontext
        if self.dist.enabled and not sync:
            no_sync = self.forward_model.no_sync
        images = batch["image"]
        targets = {k: batch[k] for k in LOSS_COLUMNS if k in batch}
        with no_sync():
            self.watch.phase("forward")
            if self.compiled:  # one graph: forward and loss are timed together, as "forward"
                losses, prob = self.loss_step(images, targets)
            else:
                preds = self.loss_step.predict(images)
                self.watch.phase("loss")
                losses = self.loss_step.loss(preds, targets)
                prob = preds["binary"].detach()
            self.watch.phase("backward")
            self.scaler.scale_loss(losses["loss"] / self.accum).backward()
        return losses, prob

    def optimizer_step(self) -> bool:
        """Unscale, check, clip, step, EMA; a non-finite step (fp16 overflow, NaN data) is undone: returns True."""
        bad = self.scaler.unscale_and_check(self.params, check=True)
        if bad:
            torch._foreach_copy_(self.buffers, self.good_buffers)
        else:
            if self.settings.clip_grad:
                torch.nn.utils.clip_grad_norm_(self.params, self.settings.clip_norm)
            lr = self.schedule(self.global_step)
            for g in self.optimizer.param_groups:
                g["lr"] = lr * g.get("lr_mult", 1.0)  # optimizer.lr_mult: a part's own factor
            self.optimizer.step()
            torch._foreach_copy_(self.good_buffers, self.buffers)
            if self.ema is not None:
                self.ema.update(self.model)
        self.scaler.update(bad)
        self.optimizer.zero_grad(set_to_none=True)
        self.global_step += 1
        self.bad_run = self.bad_run + 1 if bad else 0  # counts skipped steps in a row
        return bad

    # ----------------------------------------------------------------------------------------- each epoch
    def epoch_record(self, epoch: int, stats: EpochStats, summary: dict) -> dict:
        """metrics.jsonl's line for ``epoch`` (0-based) before its evaluation: loss terms, lr, speed."""
        return {"epoch": epoch + 1, **{term: summary[term] for term in stats.terms},
                "lr": self.schedule(max(self.global_step - 1, 0)), "epoch_time": summary["time"],
                "img_per_s": summary["img_per_s"], "data_wait_share": summary["data_wait_share"],
                "step_ms": summary["step_ms"], "skipped_steps": stats.bad // self.accum}

    def eval_model(self) -> nn.Module:
        return self.ema.module if self.ema is not None else self.model

    def eval_due(self, epoch: int) -> bool:
        """Whether (1-based) ``epoch`` ends with an evaluation."""
        return self.evaluation is not None and self.evaluation.due(epoch)

    def evaluate(self, epoch: int) -> tuple[dict, nn.Module, dict | None]:
        """The evaluation's results ({} when none is due), the model the checkpoints hold (the start's when
        the guard keeps it) and the thresholds the guard chose for it (None: the config's)."""
        if not self.eval_due(epoch):
            return {}, self.eval_model(), None
        return self.evaluation.run(self.eval_model())

    def save(self, epoch: int, metric: float | None, loss: float | None, kept_model: nn.Module,
             thresholds: dict | None = None) -> None:
        """best.ckpt, e{N}.ckpt (policy) from ``kept_model`` with the guard's ``thresholds`` for it, and
        train_resume.ckpt, each written atomically on rank 0."""
        if not self.main:
            return
        score = ranking_score(metric, loss)
        weights_ckpt = {"model": kept_model.state_dict(), "epoch": epoch, "metric": metric,
                        "config": self.settings.config, "textdet_version": __version__}
        if thresholds:
            weights_ckpt["postprocess"] = thresholds
        if score > self.best:
            self.best = score
            checkpoint.atomic_save(weights_ckpt, os.path.join(self.run_dir, "best.ckpt"))
            shown = self.settings.indicator if metric is not None else "-loss"
            logger.info("saved best.ckpt (%s %.4f)", shown, score)
        self.epoch_ckpts.save(weights_ckpt, epoch, score)
        self.save_resume(epoch, 0)

    def save_resume(self, epochs_done: int, step_in_epoch: int) -> None:
        """train_resume.ckpt: weights, optimizer, scaler, EMA, RNGs and the position in the data order."""
        if self.main:
            resume_ckpt = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                           "scaler": self.scaler.state_dict(), "ema": self.ema.state_dict() if self.ema else None,
                           "epoch": epochs_done, "step_in_epoch": step_in_epoch, "step": self.global_step,
                           "shape": self.run_shape().state_dict(),
                           "best_metric": self.best, "rng": rng_state(),
                           "epoch_ckpts": self.epoch_ckpts.state_dict(), "config": self.settings.config,
                           "textdet_version": __version__}
            checkpoint.atomic_save(resume_ckpt, os.path.join(self.run_dir, "train_resume.ckpt"))
        self.last_save_t = time.perf_counter()
