"""The blank-map watch's cost in a training step: PP-OCRv5's network (random weights; PPLCNetV3 x0.75 +
RSEFPN 96 + DB head, as `textdet convert ppocr` writes it) on one 640x640 window, forward + DB loss + backward +
Adam, with the watch's pixel counts (``ForwardAndLoss(watch_thresh=0.3)``) and without, interleaved round by
round in one process so the ratio is measured in one run. bf16 autocast where the CPU has it natively, as the
written YAML's ``amp_level: auto``.

Run: ``python benchmarks/bench_blank_watch.py [--rounds 5] [--steps 10] [--threads 2]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import torch
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_compile import random_batch, timed_steps  # noqa: E402


def ppocr_v5_step_parts():
    """PP-OCRv5's model and DB loss as the written YAML builds them, and the amp settings of ``auto``."""
    from textdet.commands.ppocr import ARCHITECTURES, ppocr_config
    from textdet.config import load_config
    from textdet.device import cpu_bf16_fast
    from textdet.engine import build
    from textdet.engine.amp import amp_settings

    written = ppocr_config("none.ckpt", "v5", ARCHITECTURES[0], "PP-OCRv5 mobile det")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(written, f)
    cfg = load_config(f.name, ["model.pretrained=False"])
    os.unlink(f.name)
    torch.manual_seed(0)
    model = build.build_model_from_config(cfg, pretrained_backbone=False).train()
    model.to(memory_format=torch.channels_last)
    amp = amp_settings("O2" if cpu_bf16_fast() else "O0", "cpu")
    return model, build.build_loss_from_config(cfg), amp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from textdet.engine.step import ForwardAndLoss

    model, loss_fn, amp = ppocr_v5_step_parts()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-5)
    images, targets = random_batch(1, 640)
    steps = {"without": ForwardAndLoss(model, loss_fn, amp), "with": ForwardAndLoss(model, loss_fn, amp, 0.3)}
    timed_steps(steps["without"], optimizer, images, targets, 3)  # warm-up
    times: dict[str, list[float]] = {"without": [], "with": []}
    for _ in range(args.rounds):
        for name, step in steps.items():
            times[name] += timed_steps(step, optimizer, images, targets, args.steps)
    median_ms = {name: 1000 * sorted(t)[len(t) // 2] for name, t in times.items()}
    print(json.dumps({"amp": str(amp.dtype), "threads": args.threads, "steps_each": len(times["with"]),
                      "without_ms": round(median_ms["without"], 1), "with_ms": round(median_ms["with"], 1),
                      "with_over_without": round(median_ms["with"] / median_ms["without"], 4)}))


if __name__ == "__main__":
    main()
