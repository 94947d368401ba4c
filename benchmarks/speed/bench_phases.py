"""Cost of the sampled per-phase step breakdown (watch/phases.py): a training step with every phase synchronised
and timed against the same step with the hooks unarmed (what the other log_interval - 1 steps do).

Run: ``python benchmarks/speed/bench_phases.py [--rounds 7] [--steps 4] [--width 64] [--size 256] [--batch 4]
[--device cpu]``

Both arms run ``Trainer.train_step`` + ``optimizer_step`` with the loop's hooks (``enter`` per phase,
``end_step``) on one device batch prepared once; the sampled arm calls ``arm()`` first, so every phase
boundary synchronises the device and reads the clock. The arms alternate within each round (the order
rotates), so load from other processes hits both; an A/A arm (unarmed again) gives the noise floor. The
overhead of a run is (sampled - unarmed) / log_interval of a step: printed for log_interval 1, 10 and 100
(the default). A second figure times the hooks alone (no model) 10,000 times: their fixed cost per step.
A script, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch
from bench_engine_overhead import build_trainer

from textdet.data.synth import generate_dataset
from textdet.device import synchronize
from textdet.watch.phases import StepPhases


def one_step(trainer, batch, sampled: bool) -> float:
    phases = trainer.watch.phases
    synchronize(trainer.device)
    start = time.perf_counter()
    if sampled:
        phases.arm()
    trainer.train_step(batch, sync=True)
    phases.enter("optimizer")
    trainer.optimizer_step()
    phases.end_step(0.0, lambda: 0.0, window_done=True)
    synchronize(trainer.device)
    phases.take()
    return time.perf_counter() - start


def hooks_alone(device: torch.device, n: int = 10000) -> tuple[float, float]:
    """Microseconds per step of the hooks alone: unarmed, and armed (sync + clock at each boundary)."""
    result = []
    for sampled in (False, True):
        phases = StepPhases(device)
        start = time.perf_counter()
        for _ in range(n):
            if sampled:
                phases.arm()
            for name in ("forward", "loss", "backward", "optimizer"):
                phases.enter(name)
            phases.end_step(0.0, lambda: 0.0, window_done=True)
            phases.take()
        result.append(1e6 * (time.perf_counter() - start) / n)
    return result[0], result[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        generate_dataset(f"{tmp}/data", n_train=args.batch * 2, n_val=1, seed=0, size=(args.size, args.size),
                         progress=False)
        trainer = build_trainer(f"{tmp}/data", f"{tmp}/run", args.width, args.size, args.batch, args.device)
        batch = trainer.feed(next(iter(trainer.train_loader)))
        trainer.forward_model.train()
        for _ in range(2):
            one_step(trainer, batch, sampled=True)  # warm-up
        arms = {"unarmed": [], "sampled": [], "unarmed again": []}
        order = list(arms)
        for round_index in range(args.rounds):
            for name in order[round_index % 3:] + order[:round_index % 3]:
                arms[name] += [one_step(trainer, batch, name == "sampled") for _ in range(args.steps)]
        median = {name: statistics.median(times) for name, times in arms.items()}
        extra = median["sampled"] - median["unarmed"]
        print(f"device {trainer.device}, DBNet-R18 width {args.width}, {args.size}x{args.size}, batch {args.batch}, "
              f"{args.rounds} rounds x {args.steps} steps per arm, torch {torch.__version__}")
        for name, value in median.items():
            print(f"  {name:<14} median {1000 * value:8.2f} ms   min {1000 * min(arms[name]):8.2f} ms")
        print(f"  noise floor (A/A): {100 * (median['unarmed again'] / median['unarmed'] - 1):+.2f}%")
        for interval in (1, 10, 100):
            print(f"  overhead at log_interval {interval:>3}: {100 * extra / interval / median['unarmed']:+.3f}%")
    unarmed_us, armed_us = hooks_alone(trainer.device)
    print(f"  hooks alone: {unarmed_us:.2f} us per unsampled step, {armed_us:.2f} us per sampled step")


if __name__ == "__main__":
    main()
