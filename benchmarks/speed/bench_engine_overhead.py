"""Engine overhead: a textdet training step against a bare PyTorch loop, same model, loss and batch.

Run: ``python benchmarks/speed/bench_engine_overhead.py [--rounds 7] [--steps 3] [--width 64] [--size 256]
[--batch 4]``

textdet's step is ``Trainer.train_step`` + ``Trainer.optimizer_step`` (autocast context, loss
scaler, accumulation bookkeeping, overflow check, LR schedule, zero_grad) on a device batch prepared
once. The bare loop is ``model(x) -> DBLoss -> backward -> SGD.step -> zero_grad`` on the same
model object and batch, with an SGD of the same hyperparameters. A third arm repeats the bare loop
(A/A): its difference from the first bare arm is the noise floor of this run. The arms alternate
within each round (the order rotates between rounds), so load from other processes hits all three;
medians and minima over all timed steps are reported (the minimum is the step least disturbed by
other processes). A second run on a tiny model shows the engine's fixed cost per step in ms, which
divided by the big model's step time bounds the overhead more tightly than the noisy difference of
two large figures. A script, not a test.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import time

import torch

import textdet
from textdet.build.training import build_trainer as build_from_config
from textdet.config import load_config
from textdet.data.synth import generate_dataset
from textdet.engine.trainer import Trainer

RECIPE = os.path.join(os.path.dirname(textdet.__file__), "recipes", "synthetic_dbnet_r18.yaml")


def build_trainer(root: str, run_dir: str, width: int, size: int, batch: int, device: str = "cpu") -> Trainer:
    """The built-in recipe's DBNet-R18 at ``width`` with SGD (momentum 0.9, wd 1e-4, no bias/BN filter)."""
    opts = {
        "train.dataset.dataset_root": root,
        "train.ckpt_save_dir": run_dir,
        "model.backbone.width": width,
        "train.dataset.transform_pipeline.RandomCropWithBBox.crop_size": f"[{size}, {size}]",
        "train.loader.batch_size": batch,
        "train.loader.num_workers": 0,
        "system.val_while_train": False,
        "optimizer.opt": "SGD",
        "optimizer.momentum": 0.9,
        "optimizer.weight_decay": 1.0e-4,
        "optimizer.filter_bias_and_bn": False,
    }
    cfg = load_config(RECIPE, [f"{k}={v}" for k, v in opts.items()])
    trainer = build_from_config(cfg, device=device, progress=False, dry_run=True)  # dry_run: no run folder is written
    logging.getLogger("textdet").setLevel(logging.WARNING)
    return trainer


def measure(trainer: Trainer, rounds: int, steps: int, warmup: int) -> tuple[dict[str, list[float]], list[float]]:
    """Seconds per step of each arm (textdet, bare, bare again), interleaved; and the per-round
    textdet/bare ratios of the fastest steps."""
    model, loss_fn = trainer.model, trainer.loss_step.loss_fn
    batch = trainer.feed(next(iter(trainer.train_loader)))
    targets = {k: batch[k] for k in ("binary_map", "mask", "thresh_map", "thresh_mask")}
    x = batch["image"]
    group = trainer.optimizer.param_groups[0]
    bare_opt = torch.optim.SGD(model.parameters(), lr=group["lr"], momentum=group["momentum"],
                               weight_decay=group["weight_decay"])
    model.train()

    def textdet_step() -> None:
        trainer.train_step(batch, sync=True)
        trainer.optimizer_step()

    def bare_step() -> None:
        loss_fn(model(x), **targets)["loss"].backward()
        bare_opt.step()
        bare_opt.zero_grad(set_to_none=True)

    arms = {"textdet": textdet_step, "bare": bare_step, "bare (A/A)": bare_step}
    times: dict[str, list[float]] = {k: [] for k in arms}
    ratios = []
    for fn in arms.values():
        for _ in range(warmup):
            fn()
    for r in range(rounds):
        names = list(arms)
        per_round = {}
        for name in names[r % 3:] + names[:r % 3]:  # rotate the order: no arm always runs first
            ts = []
            for _ in range(steps):
                start = time.perf_counter()
                arms[name]()
                ts.append(time.perf_counter() - start)
            times[name] += ts
            per_round[name] = min(ts)
        ratios.append(per_round["textdet"] / per_round["bare"])
    return times, ratios


def report(title: str, times: dict[str, list[float]], ratios: list[float]) -> None:
    """Medians, minima (the least-disturbed step: contention only ever adds time) and the overhead by each."""
    print(title)
    med = {k: 1000 * statistics.median(v) for k, v in times.items()}
    low = {k: 1000 * min(v) for k, v in times.items()}
    for name in times:
        q = statistics.quantiles(times[name], n=4) if len(times[name]) > 1 else times[name] * 3
        print(f"  {name:<11} median {med[name]:8.2f} ms/step (IQR {1000 * q[0]:.2f}-{1000 * q[2]:.2f}), "
              f"min {low[name]:8.2f}")
    print(f"  overhead textdet vs bare: {100 * (med['textdet'] / med['bare'] - 1):+.2f}% (medians), "
          f"{100 * (low['textdet'] / low['bare'] - 1):+.2f}% (minima), "
          f"{100 * (statistics.median(ratios) - 1):+.2f}% (median of per-round ratios of minima); "
          f"absolute {med['textdet'] - med['bare']:+.2f} ms (medians), {low['textdet'] - low['bare']:+.2f} ms (minima)")
    print(f"  noise floor, bare vs bare (A/A): {100 * (med['bare (A/A)'] / med['bare'] - 1):+.2f}% (medians), "
          f"{100 * (low['bare (A/A)'] / low['bare'] - 1):+.2f}% (minima)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per arm per round")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per arm first")
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--no-tiny", action="store_true", help="skip the tiny-model run (absolute cost in ms)")
    parser.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's, one per core)")
    args = parser.parse_args()
    if args.threads:
        # One thread is far steadier on a shared machine: with two, every parallel region waits at an
        # OpenMP barrier for whichever thread another process has descheduled.
        torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    tmp = tempfile.mkdtemp(prefix="textdet_overhead_")
    root = os.path.join(tmp, "synth")
    generate_dataset(root, n_train=max(args.batch, 4), n_val=0, seed=0, size=(args.size, args.size), progress=False)
    trainer = build_trainer(root, os.path.join(tmp, "run"), args.width, args.size, args.batch)
    n_params = sum(p.numel() for p in trainer.model.parameters())
    times, ratios = measure(trainer, args.rounds, args.steps, args.warmup)
    report(f"DBNet-R18 width {args.width} ({n_params / 1e6:.1f} M params), {args.batch}x3x{args.size}x{args.size}, "
           f"CPU, {torch.get_num_threads()} threads, {args.rounds} rounds x {args.steps} steps per arm", times, ratios)
    if not args.no_tiny:
        # The engine's own cost is fixed per step (Python bookkeeping), so a model whose compute is
        # tiny shows it in absolute ms, with far less noise than a difference of two big figures.
        tiny = build_trainer(root, os.path.join(tmp, "run_tiny"), 8, 64, 2)
        times, ratios = measure(tiny, args.rounds * 2, args.steps * 5, args.warmup)
        report(f"tiny DBNet-R18 width 8, 2x3x64x64 (absolute engine cost), {args.rounds * 2} rounds x "
               f"{args.steps * 5} steps per arm", times, ratios)
    print(f"  load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
