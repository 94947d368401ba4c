"""``textdet bench PART``: time one part alone with the config's settings and the real objects
(``textdet.build``, ``Trainer``, ``Evaluator``), warm-up untimed; ``--json`` prints one object on stdout (logs
go to stderr)."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from textdet.build import parts
from textdet.build.training import build_loss_from_config, build_trainer
from textdet.commands.bench_infer import bench_eval, bench_postprocess, bench_predict
from textdet.config import load_config
from textdet.data.dataset import keep_freed_memory
from textdet.data.device_targets import split_device_targets
from textdet.data.pipeline import CROPS
from textdet.device import pick_device as _device
from textdet.device import synchronize
from textdet.errors import SampleError, TextdetError
from textdet.runtime.amp import amp_settings
from textdet.runtime.feed import Prefetcher, split_device_normalize
from textdet.watch.profiling import StepProfiler, parse_window

# --n: samples (data), timed iterations (model), timed steps (train), maps (postprocess), images (eval, predict).
DEFAULT_N = {"data": 64, "model": 10, "train": 10, "postprocess": 20, "eval": 50, "predict": 50}
# --warmup: untimed samples / iterations / steps / maps / batches before timing starts.
DEFAULT_WARMUP = {"data": 1, "model": 3, "train": 3, "postprocess": 1, "eval": 1, "predict": 1}


def run(args: argparse.Namespace) -> int:
    """Run ``textdet bench``; raises TextdetError (the CLI prints it) on bad input."""
    for flag, low in (("n", 1), ("warmup", 0), ("threads", 1)):
        value = getattr(args, flag, None)
        if value is not None and value < low:
            raise TextdetError(f"--{flag} must be >= {low}, got {value}")
    if getattr(args, "maps", None) and args.part != "postprocess":
        raise TextdetError(f"--maps is for `textdet bench postprocess`, not `{args.part}`")
    if getattr(args, "ckpt", None) and args.part != "eval":
        raise TextdetError(f"--ckpt is for `textdet bench eval`, not `{args.part}`")
    if getattr(args, "profile", None):
        if args.part != "train":
            raise TextdetError(f"--profile is for `textdet bench train`, not `{args.part}`")
        parse_window(args.profile)  # a bad window fails before the build
    cfg = load_config(args.config, args.opt)
    if getattr(args, "threads", None):
        torch.set_num_threads(args.threads)
    n = args.n if args.n is not None else DEFAULT_N[args.part]
    warmup = args.warmup if getattr(args, "warmup", None) is not None else DEFAULT_WARMUP[args.part]
    with contextlib.redirect_stdout(sys.stderr):  # the engine logs to stdout; keep it for the result
        result = BENCHES[args.part](cfg, args, n, warmup)
    result = {k: _rounded(v) for k, v in result.items()}
    print(json.dumps(result) if args.json else format_table(args.part, result), flush=True)
    return 0


# ------------------------------------------------------------------------------------------------ data
def bench_data(cfg, args: argparse.Namespace, n: int, warmup: int) -> dict:
    """The train pipeline as the trainer runs it: one process (``dataset.load``), then the real loader. With
    ``cache_images`` the first pass (``samples_per_s_first_epoch``) fills the cache and the rest is the steady state.
    """
    keep_freed_memory()  # this process runs the pipeline as a loader worker does
    device = _device(args.device)
    parts.validate(cfg, ("train",))
    # Normalisation moves to the device on CUDA only, as in the Trainer.
    pipe, normalize = split_device_normalize(parts.build_pipeline(cfg, "train"), device.type != "cpu")
    dataset = parts.build_dataset(cfg, "train", pipe)
    pipe.timing = True  # this instance only: the loader's workers get a copy made below, with timing off
    for i in range(warmup):
        _load(dataset, cfg.system.seed, i)
    pipe.reset_stats()
    first, used = _timed_pass(dataset, cfg.system.seed, n)
    cached = fill_image_cache(dataset)
    steady = first
    if cached:
        pipe.reset_stats()
        steady, used = _timed_pass(dataset, cfg.system.seed, n)
    pipe.timing = False
    stats = dict(pipe.stats)
    shipped = _shipped_mb(dataset)
    loader = parts.build_split_loader(cfg, "train", dataset, 0, 1, device)
    workers = loader.num_workers  # the engine caps the configured count at the available cores
    rate_workers = _loader_rate(loader, n, skip=max(workers, 1), column=dataset.output_columns[0])
    # train.targets_on_device: the same workers without ShrinkBinaryMap/BorderMap (the split pipeline keeps the
    # filled image cache) and the device half timed per batch on this device.
    dev_pipe, targets = split_device_targets(pipe, True, device) if "ShrinkBinaryMap" in stats else (pipe, None)
    dev_rate = targets_ms = dev_mb = None
    if targets is not None:
        dev_set = parts.build_dataset(cfg, "train", dev_pipe, device_targets=True)
        dev_loader = parts.build_split_loader(cfg, "train", dev_set, 0, 1, device)
        dev_rate = _loader_rate(dev_loader, n, skip=max(workers, 1), column=dev_set.output_columns[0])
        dev_mb = _shipped_mb(dev_set)
        batch = next(iter(dev_loader))
        hw = batch["image"].shape[1:3] if batch["image"].dtype == torch.uint8 else batch["image"].shape[-2:]
        targets_ms = 1000 * _median_seconds(lambda: targets(batch, hw, device), 5, 1, device)
    return {"samples_per_s": used / max(steady, 1e-9), "samples_per_s_first_epoch": used / max(first, 1e-9),
            "samples_per_s_workers": rate_workers, "samples_per_s_workers_targets_on_device": dev_rate,
            "targets_on_device_ms_per_batch": targets_ms, "num_workers": workers,
            "num_workers_config": cfg.train.loader.num_workers, "ms_per_sample": 1000 * steady / max(used, 1),
            "mb_per_sample_shipped": shipped, "mb_per_sample_shipped_targets_on_device": dev_mb,
            "ms_per_transform": {k: 1000 * v["seconds"] / max(v["count"], 1) for k, v in stats.items()},
            "n": n, "skipped": n - used, "image_cache": cached, "device_normalize": normalize is not None}


def _load(dataset, seed: int, i: int) -> bool:
    """Sample ``i`` (cycling) with epoch 0's random stream (DetDataset.__getitem__'s); False if unusable."""
    index = i % len(dataset)
    try:
        dataset.load(index, np.random.default_rng([seed, 0, index, 0]))
    except SampleError:
        return False
    return True


def _shipped_mb(dataset) -> float:
    """MB a worker ships per sample (the loader's columns of sample 0)."""
    sample = dataset[0]
    return sum(getattr(sample.get(c), "nbytes", 0) for c in dataset.output_columns) / 1e6


def _timed_pass(dataset, seed: int, n: int) -> tuple[float, int]:
    """Seconds for ``n`` samples in this process, and how many were usable."""
    start = time.perf_counter()
    used = sum(_load(dataset, seed, i) for i in range(n))
    return time.perf_counter() - start, used


def fill_image_cache(dataset) -> bool:
    """Decode every image into the dataset's shared cache, as a first epoch does; False when it has none."""
    if getattr(dataset, "cache", None) is None:
        return False
    decode = dataset.transform.transforms[0]  # the CachedDecode the dataset put first
    for r in dataset.records:
        path = os.path.join(dataset.image_dir, r.rel_path)
        if dataset.cache.get(path) is None:
            with contextlib.suppress(SampleError):  # an unreadable image stays uncached, as in training
                decode({"img_path": path, "label": r.annotations}, None)
    return True


def _loader_rate(loader, n: int, skip: int, column: str) -> float:
    """Samples/s of ``loader`` over ``n`` samples after ``skip`` batches (the workers' first batches come at once)."""
    batches = _endless(loader)
    for _ in range(skip):
        next(batches)
    got, start = 0, time.perf_counter()
    while got < n:
        got += len(next(batches)[column])
    return got / max(time.perf_counter() - start, 1e-9)


def _endless(batches) -> Iterator:
    """Iterate a loader (or a Prefetcher over one) epoch after epoch, as training does."""
    sampler = getattr(batches, "loader", batches).sampler  # a Prefetcher keeps its loader in .loader
    for epoch in itertools.count():
        sampler.set_epoch(epoch)
        yield from batches


# ------------------------------------------------------------------------------------------------ model
def bench_model(cfg, args: argparse.Namespace, n: int, warmup: int) -> dict:
    """Forward (inference) and forward + loss + backward on random input at the training crop and batch."""
    device = _device(args.device)
    h, w = train_crop(cfg)
    bs = cfg.train.loader.batch_size
    amp = amp_settings(cfg.system.amp_level, device.type, cfg.system.amp_dtype)
    # weights don't change speed
    model = parts.build_model_from_config(cfg, pretrained_backbone=False).to(device)
    if device.type != "cpu":
        model.to(memory_format=torch.channels_last)
    loss_fn = build_loss_from_config(cfg).to(device)
    gen = torch.Generator(device="cpu").manual_seed(cfg.system.seed)
    x = torch.randn(bs, 3, h, w, generator=gen).to(device)
    targets = {"binary_map": (torch.rand(bs, 1, h, w, generator=gen) > 0.8).float().to(device),
               "mask": torch.ones(bs, h, w, device=device),
               "thresh_map": (0.3 + 0.4 * torch.rand(bs, h, w, generator=gen)).to(device),
               "thresh_mask": (torch.rand(bs, h, w, generator=gen) > 0.5).float().to(device)}

    def forward() -> None:
        with torch.inference_mode(), amp.context():
            model(x)

    def forward_backward() -> None:
        with amp.context():
            preds = model(x)
        loss_fn(preds, **targets)["loss"].backward()
        model.zero_grad(set_to_none=True)

    model.eval()
    fwd = _median_seconds(forward, n, warmup, device)
    model.train()
    fwd_bwd = _median_seconds(forward_backward, n, warmup, device)
    return {"fwd_img_per_s": bs / fwd, "fwd_bwd_img_per_s": bs / fwd_bwd, "fwd_ms": 1000 * fwd,
            "fwd_bwd_ms": 1000 * fwd_bwd, "batch_size": bs, "input_hw": [h, w], "device": str(device),
            "amp_level": amp.describe(), "threads": torch.get_num_threads(), "n": n}


def train_crop(cfg) -> tuple[int, int]:
    """(h, w) of the train pipeline's crop (RandomCropWithBBox, RandomTextCrop), else 640x640."""
    if cfg.train.dataset.transform_pipeline:
        for t in parts.build_pipeline(cfg, "train", fuse=False).transforms:
            if isinstance(t, CROPS):
                return int(t.crop_size[0]), int(t.crop_size[1])
    return 640, 640


def _median_seconds(fn: Callable[[], None], n: int, warmup: int, device) -> float:
    """Median wall time of ``fn`` over ``n`` calls after ``warmup`` calls (the median resists load bursts)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(n):
        synchronize(device)
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# ------------------------------------------------------------------------------------------------ train
def bench_train(cfg, args: argparse.Namespace, n: int, warmup: int) -> dict:
    """Whole training steps through the real Trainer: loader, Prefetcher, train_step, optimizer_step."""
    _device(args.device)  # a clear error for a device that is not there
    cfg.model.resume = False  # never load a run's checkpoint: speed does not depend on it
    cfg.system.val_while_train = False  # no eval set needed
    # The start guard acts at evaluations only (and refuses a run without them); a step is the same
    # without it.
    cfg.train.guard_holdout = 0
    cfg.train.guard_thresholds = False
    # dry_run: the Trainer builds everything but writes no run folder or train.log.
    trainer = build_trainer(cfg, device=args.device, progress=False, dry_run=True)
    # time the steady state of epochs 2+, not the first decode
    cached = fill_image_cache(trainer.train_loader.dataset)
    device = trainer.device
    batches = Prefetcher(trainer.train_loader, trainer.feed)
    images, wait, start = 0, 0.0, time.perf_counter()
    trainer.forward_model.train()
    profiler = None
    if args.profile:  # steps counted from 1, warm-up steps included
        profile_dir = os.path.join(cfg.train.ckpt_save_dir, "profile")
        profiler = StepProfiler(parse_window(args.profile), profile_dir, 0, True, device)
    for step, batch in enumerate(itertools.islice(_endless(batches), warmup + n), 1):
        last_micro = step % trainer.accum == 0
        trainer.train_step(batch, sync=last_micro)
        if last_micro:
            trainer.optimizer_step()
        if profiler is not None:
            profiler.step()
        if step == warmup:
            synchronize(device)
            start = time.perf_counter()
        elif step > warmup:
            images += batch["image"].shape[0]
            wait += batches.wait  # seconds this step waited for its batch
    synchronize(device)
    elapsed = time.perf_counter() - start
    if profiler is not None:
        profiler.close()
    return {"img_per_s": images / max(elapsed, 1e-9), "step_ms": 1000 * elapsed / n,
            "data_wait_share": wait / max(elapsed, 1e-9), "steps": n, "batch_size": trainer.train_loader.batch_size,
            "num_workers": trainer.train_loader.num_workers, "device": str(device), "amp_level": trainer.amp.describe(),
            "compiled": trainer.compiled, "image_cache": cached,
            **({"profile": profiler.trace_path} if profiler is not None else {})}


# ------------------------------------------------------------------------------------------------ helpers
BENCHES: dict[str, Callable[..., dict]] = {
    "data": bench_data, "model": bench_model, "train": bench_train, "postprocess": bench_postprocess,
    "eval": bench_eval, "predict": bench_predict}


def _rounded(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return round(value, 4) if isinstance(value, float) else value


def format_table(part: str, result: dict) -> str:
    """A short human table: one row per figure, then the per-transform times (data)."""
    rows = [(k, v) for k, v in result.items() if not isinstance(v, dict)]
    width = max(len(k) for k, _ in rows)
    lines = [f"textdet bench {part}"] + [f"  {k:<{width}}  {v}" for k, v in rows]
    per = result.get("ms_per_transform")
    if per:
        total = sum(per.values()) or 1.0
        w = max(len(k) for k in per)
        lines.append(f"  {'transform':<{w}}  {'ms/sample':>9}  share")
        lines += [f"  {k:<{w}}  {v:9.2f}  {100 * v / total:4.0f}%" for k, v in per.items()]
    return "\n".join(lines)
