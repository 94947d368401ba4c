"""A training run built from a config: the loss, the schedule, the optimizer, loss scaling, EMA, the
evaluation during training with its start guard, the watch, and the ``Trainer`` that takes them all. The
build runs in the order a user waits on it: checks first (a typo or a wrong path fails in seconds), then the
data, whose loader workers start on the first batch while the model is built."""

from __future__ import annotations

import logging
import os
import sys
from concurrent.futures import Future

import torch
from torch import nn

from textdet.build.parts import (
    build_dataset,
    build_metric_from_config,
    build_model_from_config,
    build_postprocess_from_config,
    build_split_loader,
    check_model_specs,
    inference_amp,
    inference_runtime,
    main_indicator,
    scaled_tile,
)
from textdet.build.sections import build_section, train_splits, validate
from textdet.config import Config, dump_yaml, to_dict
from textdet.config.loader import located, log_level
from textdet.data.dataset import DetDataset
from textdet.data.device_targets import split_device_targets
from textdet.data.pipeline import Compose
from textdet.device import compiles_by_default, is_accelerator, pick_device, set_deterministic
from textdet.engine.distributed import init_distributed
from textdet.engine.ema import ModelEMA
from textdet.engine.finetune import freeze_parts
from textdet.engine.guard import StartGuard
from textdet.engine.optim import build_optimizer_in_background, checked_lr_mult
from textdet.engine.resume import find_resume
from textdet.engine.retention import EpochCheckpoints
from textdet.engine.rng import seed_everything
from textdet.engine.rundir import prepare_run_dir
from textdet.engine.schedule import LRSchedule
from textdet.engine.step import ForwardAndLoss, compile_step, enable_compile_cache, want_compile
from textdet.engine.train_eval import TrainEvaluation
from textdet.engine.trainer import Trainer, TrainParts, TrainSettings
from textdet.errors import ConfigError
from textdet.loss import LOSSES
from textdet.models import count_parameters
from textdet.runtime.amp import LossScaler, amp_settings
from textdet.runtime.evaluator import Evaluator, ThresholdSweep
from textdet.runtime.feed import DeviceInput, split_device_normalize
from textdet.runtime.ranks import DistInfo, is_main
from textdet.watch import preflight
from textdet.watch.logs import banner, setup_logging
from textdet.watch.run import RunWatch, WatchSettings
from textdet.watch.startup import StartupTimer

logger = logging.getLogger("textdet")


def build_trainer(cfg: Config, device: str | None = None, compile: str = "auto", progress: bool | None = None,
                  startup: StartupTimer | None = None, dry_run: bool = False, overwrite: bool = False,
                  pipelines: dict | None = None, profile_window: tuple[int, int] | None = None) -> Trainer:
    """The Trainer of ``cfg`` on ``device``. ``compile``: auto/on/off; ``progress`` None: bars when stdout is
    a terminal; ``startup``: the CLI's start-up timer (the build marks its stages on it); ``dry_run``: build
    everything, write nothing; ``overwrite``: reuse a run folder that holds another run; ``pipelines``: what
    ``validate`` returned (None validates); ``profile_window``: ``--profile START:STOP``."""
    if startup is None:
        startup = StartupTimer()
    chosen = pick_device(device)
    dist = init_distributed(cfg.system.distribute, chosen, preflight=preflight.check)
    run_dir = cfg.train.ckpt_save_dir
    main = is_main()
    resume_path = find_resume(cfg.model.resume, run_dir)
    if main and not dry_run:
        prepare_run_dir(run_dir, resume_path is not None, overwrite)
    setup_logging(None if dry_run else run_dir, main, log_level(cfg.system.log_level))
    if cfg.model.resume and resume_path is None:
        logger.info("model.resume: no checkpoint in %s, starting fresh", run_dir)
    if progress is None:
        progress = sys.stdout.isatty()
    seed_everything(cfg.system.seed, dist.rank)
    set_deterministic(cfg.system.deterministic)
    meta = getattr(cfg, "meta", None)  # None for a Config built in code rather than read from YAML
    if meta is not None:
        for key, reason in meta.ignored:
            logger.info("ignored config key %s: %s", key, reason)
    startup.mark("device + checks setup")
    if not pipelines:
        pipelines = validate(cfg, train_splits(cfg))

    # Checks first (model and loss arguments too), then data: a typo or a wrong path fails in seconds.
    check_model_specs(cfg)
    loss_fn = build_loss_from_config(cfg)
    on_accelerator = is_accelerator(chosen)
    train_pipe, normalize = split_device_normalize(pipelines["train"], on_accelerator)
    train_pipe, targets = split_device_targets(train_pipe, cfg.train.targets_on_device, chosen)
    train_set = build_dataset(cfg, "train", train_pipe, device_targets=targets is not None,
                              aside_every=guard_aside_every(cfg))
    eval_set = eval_pipe = eval_normalize = None
    if "eval" in pipelines:
        eval_pipe, eval_normalize = split_device_normalize(pipelines["eval"], on_accelerator)
        eval_set = build_dataset(cfg, "eval", eval_pipe)
    train_loader = build_split_loader(cfg, "train", train_set, dist.rank, dist.world_size, chosen)
    # Workers start on the first batch now, while the model is built (start-up overlap); a resumed run starts
    # at a later epoch, whose order is only known after loading.
    early_batches = None
    if train_loader.num_workers > 0 and not dry_run and resume_path is None:
        train_loader.sampler.set_epoch(0)
        early_batches = iter(train_loader)
    postprocess = build_postprocess_from_config(cfg)
    metric = build_metric_from_config(cfg)
    indicator = main_indicator(cfg)
    startup.mark("data index")

    # The model (ImageNet weights skipped when resuming), its precision, and what trains it.
    amp = amp_settings(cfg.system.amp_level, chosen.type, cfg.system.amp_dtype)
    model = build_model_from_config(cfg, pretrained_backbone=False if resume_path else None)
    freeze_parts(model, cfg.train.freeze)
    startup.mark("model build + weights")
    n_params = count_parameters(model, trainable_only=True)
    n_params_total = count_parameters(model, trainable_only=False)
    model.to(chosen)
    model.to(memory_format=torch.channels_last)  # faster convolutions on GPUs and oneDNN CPUs alike
    loss_fn.to(chosen)
    accum = cfg.train.gradient_accumulation_steps
    steps_per_epoch = len(train_loader)  # micro-batches
    if steps_per_epoch < accum:
        raise ConfigError(
            f"train.gradient_accumulation_steps={accum} is more than the {steps_per_epoch} steps of an "
            "epoch: no optimizer step would happen; lower it or the batch size")
    schedule = build_schedule(cfg, steps_per_epoch, accum)
    for warning in schedule.warnings():
        logger.warning(warning)
    optimizer: Future | torch.optim.Optimizer = build_optimizer_from_config(cfg, model)  # a Future until used
    scaler = build_loss_scaler(cfg, amp.needs_scaling)
    ema = ModelEMA(model, cfg.train.ema_decay) if cfg.train.ema else None

    # DDP and torch.compile wrap the forward only; the raw module stays the one checkpoints and EMA read.
    compiled = want_compile(compile, cfg.system.mode, chosen.type, compiles_by_default(chosen.type))
    if dist.enabled or compiled or dry_run:
        # DDP and torch.compile import torch._dynamo too: not beside the thread's import; a dry run checks
        # settings
        optimizer = optimizer.result()
    forward_model: nn.Module = model
    if dist.enabled:
        ids = [chosen.index] if on_accelerator else None
        forward_model = nn.parallel.DistributedDataParallel(model, device_ids=ids)
    loss_step = ForwardAndLoss(forward_model, loss_fn, amp)
    if compiled:  # one graph, a graph break fails the first step; DDP splits its graph at buckets
        enable_compile_cache()
        loss_step = compile_step(loss_step, fullgraph=not dist.enabled)
    startup.mark("optimizer + wrappers")

    evaluation = None
    if eval_set is not None:
        evaluation = build_train_evaluation(cfg, eval_set, eval_normalize, postprocess, metric, chosen, dist,
                                            progress, eval_pipe, indicator)
    system = cfg.system
    parts = TrainParts(
        device=chosen, dist=dist, model=model, forward_model=forward_model, loss_step=loss_step,
        compiled=compiled, amp=amp, scaler=scaler, optimizer=optimizer, schedule=schedule, ema=ema,
        train_loader=train_loader, early_batches=early_batches,
        feed=DeviceInput(chosen, normalize, channels_last=True, targets=targets), evaluation=evaluation,
        epoch_checkpoints=EpochCheckpoints(run_dir, system.ckpt_max_keep, system.ckpt_save_policy))
    train = cfg.train
    settings = TrainSettings(
        run_dir=run_dir, num_epochs=cfg.scheduler.num_epochs, accum=accum, clip_grad=train.clip_grad,
        clip_norm=train.clip_norm, ema_decay=train.ema_decay, ema_reset_on_resume=train.ema_resume == "reset",
        freeze_bn=train.freeze_bn, freeze=train.freeze, ckpt_interval_steps=train.ckpt_interval_steps,
        indicator=indicator, config=to_dict(cfg))
    watch_settings = WatchSettings(
        run_dir=run_dir, main=main, rank=dist.rank, world_size=dist.world_size, device=chosen,
        steps_per_epoch=steps_per_epoch, num_epochs=cfg.scheduler.num_epochs, accum=accum,
        batch_size=train_loader.batch_size, workers=train.loader.num_workers,
        log_interval=system.log_interval, progress=progress, step_timeout=train.step_timeout,
        max_bad_steps=train.max_bad_steps, max_blank_steps=train.max_blank_steps,
        binary_thresh=getattr(postprocess, "binary_thresh", None), lr=cfg.scheduler.lr, compiled=compiled,
        profile_window=profile_window)
    rows = banner_rows(cfg, dist, chosen, model.__class__.__name__, (n_params_total, n_params), train_set,
                       eval_set, train_loader, accum, amp.describe(), scaler, compiled, normalize is not None)
    eval_due = evaluation.due if evaluation is not None else no_evaluation
    watch = RunWatch(watch_settings, startup, banner(rows), eval_due)
    trainer = Trainer(parts, settings, watch, resume_path)
    if main and not dry_run:
        os.makedirs(run_dir, exist_ok=True)
        dump_yaml(cfg, os.path.join(run_dir, "train_config.yaml"))
    startup.mark("checkpoint/resume")
    return trainer


def no_evaluation(epoch: int) -> bool:
    """The evaluation schedule of a run that does not evaluate while training."""
    return False


# ------------------------------------------------------------------------------------------------ parts
def build_loss_from_config(cfg: Config) -> nn.Module:
    return build_section(cfg, "loss", LOSSES)


def build_schedule(cfg: Config, steps_per_epoch: int, accumulation: int) -> LRSchedule:
    """The learning rate per optimizer step, from ``scheduler`` (``steps_per_epoch``: micro-batches)."""
    scheduler = cfg.scheduler
    return LRSchedule(scheduler.scheduler, scheduler.lr, steps_per_epoch, scheduler.num_epochs,
                      warmup_epochs=scheduler.warmup_epochs, warmup_factor=scheduler.warmup_factor,
                      min_lr=scheduler.min_lr, decay_epochs=scheduler.decay_epochs,
                      decay_rate=scheduler.decay_rate, milestones=scheduler.milestones,
                      num_cycles=scheduler.num_cycles, cycle_decay=scheduler.cycle_decay,
                      lr_epoch_stair=scheduler.lr_epoch_stair, accumulation=accumulation,
                      accumulation_lr=cfg.train.accumulation_lr)


def build_optimizer_from_config(cfg: Config, model: nn.Module) -> Future:
    """The ``optimizer`` section's optimizer over ``model``, built in a thread (torch.optim imports take
    seconds): a Future whose ``result()`` is the optimizer."""
    optimizer = cfg.optimizer
    with located(cfg, "optimizer.lr_mult"):
        checked_lr_mult(model, optimizer.lr_mult)
    return build_optimizer_in_background(
        model, optimizer.opt, cfg.scheduler.lr, weight_decay=optimizer.weight_decay,
        momentum=optimizer.momentum, nesterov=optimizer.nesterov,
        filter_bias_and_bn=optimizer.filter_bias_and_bn, beta1=optimizer.beta1, beta2=optimizer.beta2,
        eps=optimizer.eps, no_weight_decay_params=optimizer.no_weight_decay_params,
        lr_mult=optimizer.lr_mult)


def build_loss_scaler(cfg: Config, needs_scaling: bool) -> LossScaler:
    """The ``loss_scaler`` section; ``needs_scaling`` (fp16 autocast) switches it on."""
    scaler = cfg.loss_scaler
    return LossScaler(needs_scaling, scaler.type == "dynamic", scaler.loss_scale, scaler.scale_factor,
                      scaler.scale_window)


def guard_aside_every(cfg: Config) -> int:
    """``train.guard_holdout`` as "every n-th training photo" (0: the guard is off), checked."""
    share = cfg.train.guard_holdout
    if not share:
        if cfg.train.guard_thresholds:
            raise ConfigError("train.guard_thresholds: the thresholds are re-chosen on the photos the start "
                              "guard sets aside, but train.guard_holdout is 0; set it (0.1 sets every 10th "
                              "photo aside) or train.guard_thresholds: false")
        return 0
    if not 0 < share <= 0.5:
        raise ConfigError(f"train.guard_holdout: {share} is not a share between 0 and 0.5 of the training "
                          "photos (0.1 sets every 10th aside; 0 turns the start guard off)")
    if not cfg.model.pretrained:
        raise ConfigError("train.guard_holdout: the start guard compares the trained model with the one it "
                          "started from, but model.pretrained names none; set model.pretrained or "
                          "train.guard_holdout: 0")
    if not cfg.system.val_while_train:
        raise ConfigError("train.guard_holdout: the start guard acts at each evaluation, but "
                          "system.val_while_train is false; turn it on or set train.guard_holdout: 0")
    return round(1 / share)


def build_guard_dataset(cfg: Config, eval_pipeline: Compose, aside_every: int) -> DetDataset:
    """The training photos the start guard sets aside, read as the eval split reads its photos (the eval
    pipeline and columns, no augmentation)."""
    train = cfg.train.dataset
    return DetDataset(train.dataset_root, train.data_dir, train.label_file, eval_pipeline,
                      cfg.eval.dataset.output_columns, sample_ratio=train.sample_ratio, seed=cfg.system.seed,
                      config_prefix="train.dataset", aside_every=aside_every, aside_only=True)


def build_start_model(cfg: Config, device: torch.device) -> nn.Module:
    """The model ``model.pretrained`` names, for inference only: the start guard's comparison."""
    model = build_model_from_config(cfg).requires_grad_(False).eval()
    model.to(device)
    return model.to(memory_format=torch.channels_last)


def build_train_evaluation(cfg: Config, eval_set: DetDataset, normalize: dict | None, postprocess, metric,
                           device: torch.device, dist: DistInfo, progress: bool, eval_pipeline: Compose,
                           indicator: str) -> TrainEvaluation:
    """The eval loader (sharded over the ranks) and an Evaluator with ``system.amp_level_infer``, as
    `textdet eval`; ``normalize``: what the device normalises (``split_device_normalize``). With
    ``train.guard_holdout``, the start guard too: the set-aside training photos, read with ``eval_pipeline``,
    and the model ``model.pretrained`` names (also after a resume); with ``train.guard_thresholds``, a
    threshold grid scored there."""
    amp = inference_amp(cfg, device.type)

    def evaluator_over(dataset: DetDataset, post, scorer) -> Evaluator:
        loader = build_split_loader(cfg, "eval", dataset, dist.rank, dist.world_size, device)
        tile = scaled_tile(cfg, eval_pipeline)
        return Evaluator(loader, post, scorer, DeviceInput(device, normalize), amp, progress, tile=tile,
                         runtime=inference_runtime(cfg, device, amp))

    guard = None
    aside_every = guard_aside_every(cfg)
    if aside_every:
        aside_set = build_guard_dataset(cfg, eval_pipeline, aside_every)
        also = ""
        if cfg.train.guard_thresholds:
            also = "; the thresholds for the trained model are re-chosen there (train.guard_thresholds)"
        logger.info("start guard (train.guard_holdout %g): %d training photos set aside (every %dth), "
                    "not trained on%s", cfg.train.guard_holdout, len(aside_set), aside_every, also)
        aside_post = build_postprocess_from_config(cfg)
        aside_metric = build_metric_from_config(cfg)
        aside = evaluator_over(aside_set, aside_post, aside_metric)
        if cfg.train.guard_thresholds:
            aside.sweep = ThresholdSweep(aside_post, aside_metric)
        start_model = build_start_model(cfg, device)
        guard = StartGuard(start_model, aside, len(aside_set), indicator, cfg.train.guard_margin,
                           cfg.train.guard_regions)
    system = cfg.system
    return TrainEvaluation(evaluator_over(eval_set, postprocess, metric), cfg.scheduler.num_epochs,
                           system.val_start_epoch, system.val_interval, guard)


def train_samples(train_set: DetDataset, min_epoch_samples: int) -> str | int:
    """The banner's sample count; a repeated set (``min_epoch_samples``) says how it got there."""
    if train_set.repeats == 1:
        return len(train_set)
    return (f"{len(train_set)} an epoch ({len(train_set.records)} photos, each {train_set.repeats} times: "
            f"train.dataset.min_epoch_samples {min_epoch_samples})")


def banner_rows(cfg: Config, dist: DistInfo, device: torch.device, model_class: str,
                n_params: tuple[int, int], train_set: DetDataset, eval_set: DetDataset | None, train_loader,
                accum: int, amp_text: str, scaler: LossScaler, compiled: bool, normalize_on_device: bool
                ) -> list[tuple[str, object]]:
    """MindOCR's start-of-training summary, with the same field names; ``n_params``: (total, trainable)."""
    devices = dist.world_size
    batch_size = train_loader.batch_size
    scheduler = cfg.scheduler
    train = cfg.train
    model_name = cfg.model.name or model_class
    backbone = (cfg.model.backbone or {}).get("name", "")
    neck = (cfg.model.neck or {}).get("name", "")
    head = (cfg.model.head or {}).get("name", "")
    evaluated = len(eval_set) if eval_set is not None else "no evaluation (val_while_train False)"
    clip = f"{train.clip_grad} (max norm {train.clip_norm})" if train.clip_grad else False
    if scaler.enabled:
        loss_scaler = f"{cfg.loss_scaler.type}, scale {scaler.scale:g}"
    else:
        loss_scaler = f"off ({cfg.loss_scaler.type} in the config; scaling only matters for fp16)"
    normalisation = "in the loader workers (a float32 table per channel)"
    if normalize_on_device:
        normalisation = "on the device (workers ship uint8)"
    return [
        ("Distribute", cfg.system.distribute),
        ("Model", f"{model_name} ({backbone}-{neck}-{head})"),
        ("Total number of parameters", n_params[0]),
        ("Total number of trainable parameters", n_params[1]),
        ("Data root", train.dataset.dataset_root),
        ("Train samples", train_samples(train_set, train.dataset.min_epoch_samples)),
        ("Eval samples", evaluated),
        ("Optimizer", cfg.optimizer.opt),
        ("Batch size", batch_size),
        ("Device", f"{device} x {devices}"),
        ("Gradient accumulation steps", accum),
        ("Global batch size", f"{batch_size} x {devices} x {accum} = {batch_size * devices * accum}"),
        ("LR", scheduler.lr),
        ("Scheduler", f"{scheduler.scheduler} (warmup {scheduler.warmup_epochs:g} epochs)"),
        ("Steps per epoch", len(train_loader)),
        ("Num epochs", scheduler.num_epochs),
        ("Clip gradient", clip),
        ("EMA", f"True (decay {train.ema_decay})" if train.ema else False),
        ("AMP level", amp_text),
        ("Loss scaler", loss_scaler),
        ("Compiled", compiled),
        ("Normalisation", normalisation),
        ("Workers", train_loader.num_workers),
        ("Run folder", os.path.abspath(cfg.train.ckpt_save_dir))]
