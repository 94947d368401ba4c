"""MindOCR's learning-rate lists against textdet's LRSchedule, whole runs; writes tests/fixtures/mindocr_schedules.json.

Every scheduler name MindOCR 0.5 knows, and the scheduler section of every MindOCR det config as written
(configs/det/*/*.yaml, ICDAR2015's 1000 training images at the config's batch size, or the user's 1012 at batch
1), goes through MindOCR's own ``create_scheduler`` (a list with one LR per micro-batch of the whole run) and
through textdet's ``LRSchedule.at_micro_step``. The table gives each case's length and max |MindOCR - textdet|.
The fixture keeps, per case, the LR at a few hundred steps (every warm-up/decay boundary, and evenly spread
steps), so tests/test_schedules_mindocr.py pins MindOCR's values without MindSpore.

Run in the MindOCR environment (see benchmarks/parity/mindocr/parity_mindocr.py for the venv; never in CI),
from the repo root:

    PYTHONPATH=src ~/venvs/mindocr/bin/python benchmarks/parity/mindocr/make_mindocr_schedules.py [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from mindocr.scheduler import create_scheduler

from textdet.engine.schedule import LRSchedule

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "fixtures", "mindocr_schedules.json")
SAMPLES = 200  # evenly spread steps kept per case, besides the boundaries
TOLERANCE = 1e-9

# name -> (steps_per_epoch, create_scheduler keywords); the configs' sections as written in MindOCR's repository
CONFIGS = {
    "user db_r50 (1012 images, batch 1)": (1012, dict(scheduler="polynomial_decay", lr=0.007, num_epochs=1,
                                                       decay_rate=0.9, warmup_epochs=3)),
    "db_r50_icdar15 (batch 10)": (100, dict(scheduler="polynomial_decay", lr=0.007, num_epochs=1200,
                                            decay_rate=0.9, warmup_epochs=3)),
    "db_r18_synthtext (2 epochs, no warm-up)": (500, dict(scheduler="polynomial_decay", lr=0.007, num_epochs=2,
                                                          decay_rate=0.9, warmup_epochs=0)),
    "db_r50_icdar15_8p (Adam)": (12, dict(scheduler="warmup_cosine_decay", lr=0.001, min_lr=0.00001,
                                          num_epochs=1200, warmup_epochs=3, decay_epochs=1150)),
    "db_mobilenetv3_ppocrv3": (125, dict(scheduler="warmup_cosine_decay", lr=0.001, min_lr=0.0, num_epochs=500,
                                         warmup_epochs=2, decay_epochs=498)),
    "east_r50_icdar15": (50, dict(scheduler="cosine_decay", lr=0.001, min_lr=0.00001, num_epochs=5000,
                                  warmup_epochs=10, decay_epochs=4900)),
    "pse_r50_icdar15 (step_decay)": (125, dict(scheduler="step_decay", lr=0.0001, decay_rate=0.9,
                                               num_epochs=1000)),
}

# every name, with the options the configs leave at their defaults (stair steps, cycles, milestones, min_lr)
SMALL = {
    "constant": (3, dict(scheduler="constant", lr=0.01, num_epochs=6, warmup_epochs=2, warmup_factor=0.1)),
    "polynomial_decay min_lr": (3, dict(scheduler="polynomial_decay", lr=0.01, min_lr=0.001, num_epochs=8,
                                        warmup_epochs=2, decay_rate=0.9)),
    "polynomial_decay stair": (3, dict(scheduler="polynomial_decay", lr=0.01, num_epochs=8, warmup_epochs=2,
                                       decay_rate=2.0, lr_epoch_stair=True, warmup_factor=0.01)),
    "cosine_decay 2 cycles": (4, dict(scheduler="cosine_decay", lr=0.01, min_lr=0.001, num_epochs=12,
                                      warmup_epochs=1, decay_epochs=4, num_cycles=2, cycle_decay=0.5)),
    "cosine_decay stair": (4, dict(scheduler="cosine_decay", lr=0.01, min_lr=0.001, num_epochs=9,
                                   warmup_epochs=2, decay_epochs=5, lr_epoch_stair=True, warmup_factor=0.01)),
    "warmup_cosine_decay truncated": (3, dict(scheduler="warmup_cosine_decay", lr=0.01, num_epochs=6,
                                              warmup_epochs=1, decay_epochs=8)),
    "exponential_decay": (3, dict(scheduler="exponential_decay", lr=0.01, num_epochs=8, warmup_epochs=2,
                                  decay_rate=0.5, decay_epochs=3)),
    "exponential_decay stair": (3, dict(scheduler="exponential_decay", lr=0.01, num_epochs=8, warmup_epochs=2,
                                        decay_rate=0.5, lr_epoch_stair=True, warmup_factor=0.01)),
    "step_decay": (3, dict(scheduler="step_decay", lr=0.01, num_epochs=10, warmup_epochs=1, decay_epochs=3,
                           decay_rate=0.5)),
    "multi_step_decay": (3, dict(scheduler="multi_step_decay", lr=0.01, num_epochs=10, warmup_epochs=2,
                                 milestones=[5, 2], decay_rate=0.1)),
}


def textdet_schedule(steps_per_epoch: int, kw: dict) -> LRSchedule:
    """textdet's schedule of a MindOCR scheduler section (create_scheduler's defaults where a key is absent)."""
    defaults = dict(min_lr=1e-6, warmup_epochs=3, warmup_factor=0.0, decay_epochs=10, decay_rate=0.9, milestones=(),
                    num_epochs=200, num_cycles=1, cycle_decay=1.0, lr_epoch_stair=False)
    args = {**defaults, **kw}
    name = args.pop("scheduler")
    return LRSchedule(name, args.pop("lr"), steps_per_epoch, args.pop("num_epochs"), **args)


def kept_steps(length: int, steps_per_epoch: int, kw: dict) -> list[int]:
    """All steps of a short run; else each epoch boundary's neighbours up to epoch 12, the last steps, evenly
    spread ones, and the first steps of every cycle/warm-up end."""
    if length <= 400:
        return list(range(length))
    keep = set(range(0, length, max(length // SAMPLES, 1)))
    for epoch in range(0, 13):
        for delta in (-1, 0, 1):
            keep.add(epoch * steps_per_epoch + delta)
    warmup_steps = steps_per_epoch * kw.get("warmup_epochs", 3)
    for delta in (-2, -1, 0, 1, 2):
        keep.add(warmup_steps + delta)
        keep.add(length - 3 + delta)
        keep.add(warmup_steps + steps_per_epoch * kw.get("decay_epochs", 10) + delta)
    return sorted(step for step in keep if 0 <= step < length)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="compare only, leave the fixture as it is")
    args = parser.parse_args()
    cases, worst = [], 0.0
    print("| case | scheduler | steps/epoch | steps | max abs(MindOCR - textdet) | equal bit for bit |")
    print("|---|---|---|---|---|---|")
    for name, (steps_per_epoch, kw) in {**CONFIGS, **SMALL}.items():
        mindocr_lrs = create_scheduler(steps_per_epoch, **kw)
        schedule = textdet_schedule(steps_per_epoch, kw)
        ours = [schedule.at_micro_step(step) for step in range(len(mindocr_lrs))]
        diff = max(abs(a - b) for a, b in zip(mindocr_lrs, ours, strict=True))
        identical = sum(a == b for a, b in zip(mindocr_lrs, ours, strict=True))
        worst = max(worst, diff)
        print(f"| {name} | {kw['scheduler']} | {steps_per_epoch} | {len(mindocr_lrs)} | {diff:.1e} | "
              f"{identical}/{len(mindocr_lrs)} |")
        steps = kept_steps(len(mindocr_lrs), steps_per_epoch, kw)
        cases.append({"name": name, "steps_per_epoch": steps_per_epoch, "scheduler": kw, "length": len(mindocr_lrs),
                      "steps": steps, "lrs": [float(mindocr_lrs[step]) for step in steps]})
    print(f"worst max |diff| {worst:.1e} ({'within' if worst < TOLERANCE else 'OVER'} {TOLERANCE:g})")
    if not args.no_write:
        with open(OUT, "w") as f:
            json.dump({"source": "mindocr 0.5.0 mindocr.scheduler.create_scheduler", "cases": cases}, f, indent=0)
            f.write("\n")
        print(f"wrote {os.path.normpath(OUT)}")
    return 0 if worst < TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
