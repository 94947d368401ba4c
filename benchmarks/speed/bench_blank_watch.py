"""The blank-map watch's cost in a training step: PP-OCRv5's network (random weights; PPLCNetV3 x0.75 +
RSEFPN 96 + DB head, as `textdet convert ppocr` writes it) on one 640x640 window, forward + DB loss + backward +
Adam, with the watch's pixel counts (``text_pixel_hits`` on the step's probability map, as
``watch.health.BlankMapWatch`` adds them after each step) and without, interleaved round by round in one process
so the ratio is measured in one run. bf16 autocast where the CPU has it natively, as the
written YAML's ``amp_level: auto``.

Run: ``python benchmarks/speed/bench_blank_watch.py [--rounds 5] [--steps 10] [--threads 2]``
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
    from textdet.build import parts, training
    from textdet.commands.ppocr import ARCHITECTURES, ppocr_config
    from textdet.config import load_config
    from textdet.device import cpu_bf16_fast
    from textdet.runtime.amp import amp_settings

    written = ppocr_config("none.ckpt", "v5", ARCHITECTURES[0], "PP-OCRv5 mobile det")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(written, f)
    cfg = load_config(f.name, ["model.pretrained=False"])
    os.unlink(f.name)
    torch.manual_seed(0)
    model = parts.build_model_from_config(cfg, pretrained_backbone=False).train()
    model.to(memory_format=torch.channels_last)
    amp = amp_settings("O2" if cpu_bf16_fast() else "O0", "cpu")
    return model, training.build_loss_from_config(cfg), amp


class WatchedStep:
    """A training step followed by the blank-map watch's pixel counts on its probability map."""

    def __init__(self, step, binary_thresh: float) -> None:
        self.step = step
        self.binary_thresh = binary_thresh
        self.window = None

    def __call__(self, images, targets):
        from textdet.watch.health import text_pixel_hits

        losses, prob = self.step(images, targets)
        hits = text_pixel_hits(prob, targets["binary_map"], targets["mask"], self.binary_thresh)
        self.window = hits if self.window is None else self.window + hits
        return losses, prob


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
    plain = ForwardAndLoss(model, loss_fn, amp)
    steps = {"without": plain, "with": WatchedStep(plain, 0.3)}
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
