"""The training recipe: build everything from the config, then one visible ``fit()`` loop that reads top to
bottom like nanoGPT's train.py: features (autocast, loss scaling, ``no_sync`` accumulation, clipping, EMA) are
flags."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
import time

import torch
from torch import nn

from textdet import __version__
from textdet.config import Config, dump_yaml, to_dict
from textdet.config.loader import log_level
from textdet.data.device_targets import split_device_targets
from textdet.device import compiles_by_default, is_accelerator, pick_device, set_deterministic
from textdet.engine import build, checkpoint, distributed
from textdet.engine.amp import amp_settings
from textdet.engine.ema import ModelEMA
from textdet.engine.evaluator import progress_bar
from textdet.engine.feed import DeviceInput, Prefetcher
from textdet.engine.finetune import freeze_parts, keep_frozen_in_eval_mode
from textdet.engine.health import HITS_KEY, BlankMapWatch, check_bad_run
from textdet.engine.logs import EpochStats, MetricsWriter, banner, setup_logging, throughput_verdict
from textdet.engine.monitor import RunMonitor
from textdet.engine.optim import load_optimizer_state
from textdet.engine.phases import StepPhases, phase_ms
from textdet.engine.resume import RunShape, continue_at, find_resume, resume_due
from textdet.engine.retention import EpochCheckpoints, ranking_score
from textdet.engine.rng import rng_state, seed_everything, set_rng_state
from textdet.engine.rundir import prepare_run_dir, trim_metrics
from textdet.engine.startup import StartupTimer, enable_compile_cache, want_compile
from textdet.engine.startup_report import StartupReport
from textdet.engine.step import ForwardAndLoss, compile_step
from textdet.engine.train_eval import build_train_evaluation
from textdet.engine.validate import LOSS_COLUMNS, train_splits, validate
from textdet.errors import ConfigError
from textdet.models import count_parameters

logger = logging.getLogger("textdet")


class Trainer:
    """Builds model, data, loss, optimizer, schedule and checkpoints from a ``Config`` and trains.
    ``compile``: auto/on/off; ``progress`` None: when stdout is a TTY; ``pipelines``: what ``validate``
    returned, None validates."""

    def __init__(self, cfg: Config, device: str | None = None, compile: str = "auto", progress: bool | None = None,
                 startup: StartupTimer | None = None, dry_run: bool = False, overwrite: bool = False,
                 pipelines: dict | None = None):
        self.cfg = cfg
        self.dry_run = dry_run
        if startup is None:
            startup = StartupTimer()
        self.startup = startup
        self.device = pick_device(device)
        self.dist = distributed.init_distributed(cfg.system.distribute, self.device)
        self.run_dir = cfg.train.ckpt_save_dir
        self.main = distributed.is_main()
        resume_path = find_resume(cfg.model.resume, self.run_dir)
        if self.main and not dry_run:
            prepare_run_dir(self.run_dir, resume_path is not None, overwrite)
        setup_logging(None if dry_run else self.run_dir, self.main, log_level(cfg.system.log_level))
        if cfg.model.resume and resume_path is None:
            logger.info("model.resume: no checkpoint in %s, starting fresh", self.run_dir)
        self.progress = sys.stdout.isatty() if progress is None else progress
        seed_everything(cfg.system.seed, self.dist.rank)
        set_deterministic(cfg.system.deterministic)
        meta = getattr(cfg, "meta", None)  # None for a Config built in code rather than read from YAML
        if meta is not None:
            for key, reason in meta.ignored:
                logger.info("ignored config key %s: %s", key, reason)
        self.startup.mark("device + checks setup")
        if not pipelines:
            pipelines = validate(cfg, train_splits(cfg))
        self._build_data(resume_path, pipelines)
        self._build_model(resume_path)
        self._build_optimisation()
        self._wrap(compile)

        self.epoch = 0  # epochs done
        self.step_in_epoch = 0  # micro-steps done in the next epoch (a mid-epoch resume)
        self.global_step = 0  # optimizer steps done
        self.best = -math.inf  # best score so far (the main indicator, or -loss without evaluation)
        self.last_save_t = time.perf_counter()
        system = cfg.system
        self.epoch_ckpts = EpochCheckpoints(self.run_dir, system.ckpt_max_keep, system.ckpt_save_policy)
        if resume_path:
            self._resume(resume_path)
        self.feed = DeviceInput(self.device, self.normalize, channels_last=True, targets=self.targets)
        self.phases = StepPhases(self.device)
        self.startup_report = StartupReport(self.startup, self.device, self.compiled, self.main,
                                            self.run_dir)
        self.profile_window: tuple[int, int] | None = None  # --profile START:STOP
        self.resumed_step = self.global_step if resume_path else None
        self.evaluation = None
        if self.evaluate_enabled:
            self.evaluation = build_train_evaluation(
                cfg, self.eval_set, self.eval_normalize, self.postprocess, self.metric, self.device,
                self.dist.rank, self.dist.world_size, self.progress, self.eval_pipe, self.indicator)
        self.startup.mark("checkpoint/resume")

    # ----------------------------------------------------------------------------------------- set-up
    def _build_data(self, resume_path: str | None, pipelines: dict) -> None:
        """Checks first (model and loss arguments too), then data: a typo or a wrong path fails in seconds."""
        cfg = self.cfg
        build.check_model_specs(cfg)
        self.loss_fn = build.build_loss_from_config(cfg)
        on_gpu = is_accelerator(self.device)
        train_pipe, self.normalize = build.split_device_normalize(pipelines["train"], on_gpu)
        train_pipe, self.targets = split_device_targets(train_pipe, cfg.train.targets_on_device, self.device)
        on_device = self.targets is not None
        self.train_set = build.build_dataset(cfg, "train", train_pipe, device_targets=on_device,
                                             aside_every=build.guard_aside_every(cfg))
        self.evaluate_enabled = "eval" in pipelines
        self.eval_set = None
        if self.evaluate_enabled:
            self.eval_pipe, self.eval_normalize = build.split_device_normalize(pipelines["eval"], on_gpu)
            self.eval_set = build.build_dataset(cfg, "eval", self.eval_pipe)
        self.train_loader = build.build_split_loader(cfg, "train", self.train_set, self.dist.rank,
                                                     self.dist.world_size, self.device)
        # Workers start on the first batch now, while the model is built (start-up overlap); a
        # resumed run starts at a later epoch, whose order is only known after loading.
        self._early_iter = None
        if self.train_loader.num_workers > 0 and not self.dry_run and resume_path is None:
            self.train_loader.sampler.set_epoch(0)
            self._early_iter = iter(self.train_loader)
        self.postprocess = build.build_postprocess_from_config(cfg)
        self.metric = build.build_metric_from_config(cfg)
        self.indicator = build.main_indicator(cfg)
        self.startup.mark("data index")

    def _build_model(self, resume_path: str | None) -> None:
        """Model (ImageNet weights skipped when resuming), loss and precision settings."""
        cfg = self.cfg
        self.amp = amp_settings(cfg.system.amp_level, self.device.type, cfg.system.amp_dtype)
        model = build.build_model_from_config(cfg, pretrained_backbone=False if resume_path else None)
        freeze_parts(model, cfg.train.freeze)
        self.startup.mark("model build + weights")
        self.n_params = count_parameters(model, trainable_only=True)
        self.n_params_total = count_parameters(model, trainable_only=False)
        model.to(self.device)
        model.to(memory_format=torch.channels_last)  # faster convolutions on GPUs and oneDNN CPUs alike
        self.model = model  # the raw module: checkpoints and EMA read it
        self.loss_fn.to(self.device)

    def _build_optimisation(self) -> None:
        """Accumulation, LR schedule, optimizer, loss scaler and EMA."""
        cfg = self.cfg
        self.accum = cfg.train.gradient_accumulation_steps
        self.steps_per_epoch = len(self.train_loader)  # micro-batches
        if self.steps_per_epoch < self.accum:
            raise ConfigError(
                f"train.gradient_accumulation_steps={self.accum} is more than the {self.steps_per_epoch} steps of an "
                "epoch: no optimizer step would happen; lower it or the batch size")
        self.opt_steps_per_epoch = self.steps_per_epoch // self.accum
        self.schedule = build.build_schedule(cfg, self.steps_per_epoch, self.accum)
        for warning in self.schedule.warnings():
            logger.warning(warning)
        self._optimizer = build.build_optimizer_from_config(cfg, self.model)  # a Future until first used
        self.scaler = build.build_loss_scaler(cfg, self.amp.needs_scaling)
        self.ema = ModelEMA(self.model, cfg.train.ema_decay) if cfg.train.ema else None
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        # BatchNorm statistics after the last good step: a skipped (non-finite) step puts them back.
        self.buffers = [b for b in self.model.buffers() if b.is_floating_point()]
        self.good_buffers = [b.clone() for b in self.buffers]
        self.bad_run = 0  # consecutive skipped optimizer steps
        self.blank_watch = BlankMapWatch(cfg, self.postprocess, self.run_dir)

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """Built in a thread (``build_optimizer_in_background``): the first use waits for it."""
        if not isinstance(self._optimizer, torch.optim.Optimizer):
            self._optimizer = self._optimizer.result()
        return self._optimizer

    def _wrap(self, compile: str) -> None:
        """DDP and torch.compile wrap the forward only; the raw module stays in self.model."""
        model = self.model
        self.forward_model: nn.Module = model
        self.compiled = want_compile(compile, self.cfg.system.mode, self.device.type,
                                     compiles_by_default(self.device.type))
        if self.dist.enabled or self.compiled or self.dry_run:
            # DDP and torch.compile import torch._dynamo too: not beside the thread's import; a dry run checks settings
            _ = self.optimizer
        if self.dist.enabled:
            ids = [self.device.index] if is_accelerator(self.device) else None
            self.forward_model = nn.parallel.DistributedDataParallel(model, device_ids=ids)
        watch_thresh = self.blank_watch.binary_thresh  # None: no probability map to count on
        self.loss_step = ForwardAndLoss(self.forward_model, self.loss_fn, self.amp, watch_thresh)
        if self.compiled:  # one graph, a graph break fails the first step; DDP splits its graph at buckets
            enable_compile_cache()
            self.loss_step = compile_step(self.loss_step, fullgraph=not self.dist.enabled)
        self.startup.mark("optimizer + wrappers")

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
        if self.ema is not None and self.cfg.train.ema_resume == "reset":  # MindOCR: EMA rebuilt, 0 updates
            self.ema = ModelEMA(self.model, self.cfg.train.ema_decay)
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
                    self.step_in_epoch, self.global_step, self.indicator, self.best)

    def run_shape(self) -> RunShape:
        """Processes x per-process batch x accumulation: saved for a resume on another cluster shape."""
        return RunShape(self.dist.world_size, self.train_loader.batch_size, self.accum)

    # ----------------------------------------------------------------------------------------- the loop
    def fit(self) -> dict:
        cfg = self.cfg
        if self.main:
            os.makedirs(self.run_dir, exist_ok=True)
            dump_yaml(cfg, os.path.join(self.run_dir, "train_config.yaml"))
            logger.info(banner(self))
        writer = MetricsWriter(self.run_dir, resumed_step=self.resumed_step) if self.main else None
        self.monitor = RunMonitor(self, writer)
        try:
            return self._fit_epochs(writer)
        except BaseException as err:
            self.monitor.failed(err)
            raise
        finally:
            self.monitor.close()

    def _fit_epochs(self, writer: MetricsWriter | None) -> dict:
        num_epochs = self.cfg.scheduler.num_epochs
        last: dict = {}
        for epoch in range(self.epoch, num_epochs):
            stats = self.train_one_epoch(epoch, num_epochs)
            summary = stats.summary()
            phases = self.phases.take_epoch()
            record = {"epoch": epoch + 1, **{term: summary[term] for term in stats.terms},
                      "lr": self.schedule(max(self.global_step - 1, 0)), "epoch_time": summary["time"],
                      "img_per_s": summary["img_per_s"], "data_wait_share": summary["data_wait_share"],
                      "step_ms": summary["step_ms"], "skipped_steps": stats.bad // self.accum}
            if phases:
                record["phase_ms"] = phase_ms(phases)
            logger.info("epoch: [%d/%d], loss: %.6f, epoch time: %.3f s, per step time: %.3f ms, fps per card: %.2f "
                        "img/s, data wait: %.1f%%, skipped steps (non-finite): %d", epoch + 1, num_epochs,
                        record.get("loss", float("nan")), summary["time"], summary["step_ms"], summary["img_per_s"],
                        100 * summary["data_wait_share"], record["skipped_steps"])
            if epoch == self.epoch:
                self.startup_report.first_epoch_done(summary["time"], stats.steps)
            if epoch == self.epoch or epoch + 1 == num_epochs:
                logger.info(throughput_verdict(summary, self.cfg, self.train_loader.batch_size, phases))
            with self.monitor.timed("evaluation"):
                perf, kept_model, thresholds = self._maybe_evaluate(epoch + 1)
            if "eval_time" in perf:
                self.monitor.eta.last_eval_s = perf["eval_time"]
            record.update(perf)
            if writer:  # before the checkpoint: a kill in between leaves a record that resume trims
                writer.write(record, self.global_step)
            with self.monitor.timed("checkpoint") as saving:
                self._save(epoch + 1, perf.get(self.indicator), record.get("loss"), kept_model, thresholds)
            logger.info("checkpoints written in %.3f s", saving["seconds"])
            if writer:
                writer.write_scalars({"ckpt_time": saving["seconds"]}, self.global_step)
            last = record
        if writer:  # rank 0 only
            writer.close()
            logger.info("run folder: %s", os.path.abspath(self.run_dir))
        distributed.barrier()
        return last

    def train_one_epoch(self, epoch: int, num_epochs: int) -> EpochStats:
        cfg = self.cfg
        start = self.step_in_epoch if epoch == self.epoch else 0  # micro-steps a mid-epoch resume skips
        self.train_loader.sampler.set_epoch(epoch, skip=start * self.train_loader.batch_size * self.dist.world_size)
        source = self.train_loader
        if epoch == 0 and self._early_iter is not None:
            source = self._early_iter  # started in _build_data: its workers are already loading
        self._early_iter = None
        self.forward_model.train()
        keep_frozen_in_eval_mode(self.model, cfg.train.freeze_bn, cfg.train.freeze)
        stats = EpochStats()  # the whole epoch
        window = EpochStats()  # since the last step line
        steps = self.steps_per_epoch
        bar = progress_bar(self.progress and self.main, steps, f"epoch {epoch + 1}/{num_epochs}")
        batches = Prefetcher(source, self.feed)
        skipped = 0
        usable = self.opt_steps_per_epoch * self.accum  # a trailing partial accumulation is not stepped
        pending: list = []  # (losses, images, wait) of this accumulation window, counted once it is stepped
        self.model.zero_grad(set_to_none=True)  # not the optimizer's: it may still be in the making
        self.monitor.epoch_begins()
        for i, batch in enumerate(batches, start):
            if i >= usable:
                break
            if epoch == self.epoch and i == start:
                self.startup_report.first_batch_ready()
            skipped += batch.get("_skipped", 0)
            last_micro = (i + 1) % self.accum == 0
            self.monitor.before_step(i)
            losses = self.train_step(batch, sync=last_micro)
            pending.append((losses, batch["image"].shape[0], batches.wait))
            if last_micro:
                self.phases.enter("optimizer")
                bad = self.optimizer_step()
                for item in pending:
                    stats.add(*item, bad=bad)
                    window.add(*item, bad=bad)
                pending.clear()
                if bad:
                    check_bad_run(self.bad_run, epoch, i + 1, cfg, self.scaler, self.run_dir)
                elif i + 1 < usable and resume_due(cfg.train.ckpt_interval_steps, self.global_step,
                                                    time.perf_counter() - self.last_save_t):
                    with self.monitor.timed("checkpoint"):
                        self._save_resume(epoch, i + 1)
            self.monitor.after_step(batches, window_done=last_micro)
            if epoch == self.epoch and i == start:
                self.startup_report.first_step_done()
            bar.set_postfix_str(self.monitor.bar_text(epoch, i + 1), refresh=False)
            bar.update(1)
            if (i + 1) % cfg.system.log_interval == 0:
                self._log_window(window, epoch, num_epochs, i + 1, steps)
                window = EpochStats()
                self.blank_watch.check(epoch, i + 1)
        bar.close()
        if skipped:
            logger.warning("epoch %d: %d sample(s) could not be used and were replaced (see the warnings above, or "
                           "run `textdet check-data -c CFG`)", epoch + 1, skipped)
        return stats

    def train_step(self, batch: dict, sync: bool) -> dict[str, torch.Tensor]:
        """Forward, loss and backward of one micro-batch; gradients are synced only on the last one."""
        no_sync = contextlib.nullcontext
        if self.dist.enabled and not sync:
            no_sync = self.forward_model.no_sync
        targets = {k: batch[k] for k in LOSS_COLUMNS if k in batch}
        with no_sync():
            self.phases.enter("forward")  # compiled: forward and loss are one graph, timed as "forward"
            losses = self.loss_step(batch["image"], targets, None if self.compiled else self.phases)
            self.blank_watch.add(losses.pop(HITS_KEY, None))
            self.phases.enter("backward")
            self.scaler.scale_loss(losses["loss"] / self.accum).backward()
        return losses

    def optimizer_step(self) -> bool:
        """Unscale, check, clip, step, EMA; a non-finite step (fp16 overflow, NaN data) is undone: returns True."""
        bad = self.scaler.unscale_and_check(self.params, check=True)
        if bad:
            torch._foreach_copy_(self.buffers, self.good_buffers)
        else:
            if self.cfg.train.clip_grad:
                torch.nn.utils.clip_grad_norm_(self.params, self.cfg.train.clip_norm)
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

    # ----------------------------------------------------------------------------------------- periodic work
    def _log_window(self, window: EpochStats, epoch: int, num_epochs: int, step: int, steps: int) -> None:
        """The log line and TensorBoard scalars of the last ``system.log_interval`` micro-steps."""
        summary = window.summary()
        wait_ms = 1000 * summary["data_wait_s"] / max(window.steps, 1)
        lr = self.schedule(max(self.global_step - 1, 0))
        logger.info(
            "epoch: [%d/%d] step: [%d/%d], loss: %.6f, lr: %.6f, per step time: %.3f ms, fps per card: %.2f "
            "img/s, data wait: %.1f ms, compute: %.1f ms (%.1f%% waiting for data), skipped steps: %d, %s",
            epoch + 1, num_epochs, step, steps, summary.get("loss", float("nan")), lr, summary["step_ms"],
            summary["img_per_s"], wait_ms, summary["step_ms"] - wait_ms, 100 * summary["data_wait_share"],
            window.bad // self.accum, self.monitor.step_line_tail(epoch, step))
        scalars = {term: summary[term] for term in window.terms}
        scalars.update(lr=lr, img_per_s=summary["img_per_s"], data_wait_share=summary["data_wait_share"],
                       loss_scale=self.scaler.scale, skipped_steps=window.bad // self.accum)
        self.monitor.step_scalars(scalars, self.global_step)

    def eval_model(self) -> nn.Module:
        return self.ema.module if self.ema is not None else self.model

    def eval_due(self, epoch: int) -> bool:
        """Whether (1-based) ``epoch`` ends with an evaluation."""
        return self.evaluation is not None and self.evaluation.due(epoch)

    def _maybe_evaluate(self, epoch: int) -> tuple[dict, nn.Module, dict | None]:
        """The evaluation's results ({} when none is due), the model the checkpoints hold (the start's when
        the guard keeps it) and the thresholds the guard chose for it (None: the config's)."""
        if not self.eval_due(epoch):
            return {}, self.eval_model(), None
        return self.evaluation.run(self.eval_model())

    def _save(self, epoch: int, metric: float | None, loss: float | None, kept_model: nn.Module,
              thresholds: dict | None = None) -> None:
        """best.ckpt, e{N}.ckpt (policy) from ``kept_model`` with the guard's ``thresholds`` for it, and
        train_resume.ckpt, each written atomically on rank 0."""
        if not self.main:
            return
        weights = kept_model.state_dict()
        score = ranking_score(metric, loss)
        weights_ckpt = {"model": weights, "epoch": epoch, "metric": metric, "config": to_dict(self.cfg),
                        "textdet_version": __version__, **({"postprocess": thresholds} if thresholds else {})}
        if score > self.best:
            self.best = score
            checkpoint.atomic_save(weights_ckpt, os.path.join(self.run_dir, "best.ckpt"))
            logger.info("saved best.ckpt (%s %.4f)", self.indicator if metric is not None else "-loss", score)
        self.epoch_ckpts.save(weights_ckpt, epoch, score)
        self._save_resume(epoch, 0)

    def _save_resume(self, epochs_done: int, step_in_epoch: int) -> None:
        """train_resume.ckpt: weights, optimizer, scaler, EMA, RNGs and the position in the data order."""
        if self.main:
            resume_ckpt = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                           "scaler": self.scaler.state_dict(), "ema": self.ema.state_dict() if self.ema else None,
                           "epoch": epochs_done, "step_in_epoch": step_in_epoch, "step": self.global_step,
                           "shape": self.run_shape().state_dict(),
                           "best_metric": self.best, "rng": rng_state(),
                           "epoch_ckpts": self.epoch_ckpts.state_dict(), "config": to_dict(self.cfg),
                           "textdet_version": __version__}
            checkpoint.atomic_save(resume_ckpt, os.path.join(self.run_dir, "train_resume.ckpt"))
        self.last_save_t = time.perf_counter()
