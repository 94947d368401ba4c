"""Compiled (system.mode 0, inductor) vs eager training step on this machine, and the compile time cold and warm.

Run: ``nice -n 5 python benchmarks/speed/bench_compile.py [--models recipe,r50] [--steps 4] [--threads 2]``

For each model, two child processes share a fresh ``TORCHINDUCTOR_CACHE_DIR``: the first compiles cold, the second
finds the cache warm. Each child builds the model and DBLoss from the config, times ``--steps`` eager steps
(forward, DB loss with OHEM, backward, Adam step; after one warm-up step), then the same steps through
``textdet.engine.step`` (what the trainer compiles: forward + loss in one ``fullgraph=True`` graph, the backward
AOTAutograd's): the first compiled step is the compile time. Eager and compiled run in the same process, one
after the other, so their ratio is measured in one run. Inputs are random tensors of a fixed shape (no loader:
the step alone). Models: ``recipe`` = the built-in recipe (DBNet-R18 width 32, batch 8 of 256x256, bf16
autocast as the recipe's O2), ``r50`` = configs/db_r50_icdar15.yaml (DBNet-R50, 640x640, fp32; ``--r50-batch``
images, default 1). Prints one JSON object per child and a summary.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = {
    "recipe": {"config": None, "size": 256, "batch": 8, "amp_level": "O2"},
    "r50": {"config": os.path.join(HERE, "..", "..", "configs", "db_r50_icdar15.yaml"), "size": 640,
            "batch": 1, "amp_level": "O0"},
}


def random_batch(batch: int, size: int, seed: int = 0):
    """Images (N, 3, S, S) and DB targets of a fixed shape, the same every call."""
    import torch

    g = torch.Generator().manual_seed(seed)
    images = torch.randn(batch, 3, size, size, generator=g).contiguous(memory_format=torch.channels_last)
    targets = {"binary_map": (torch.rand(batch, size, size, generator=g) > 0.8).float(),
               "mask": torch.ones(batch, size, size), "thresh_map": torch.rand(batch, size, size, generator=g),
               "thresh_mask": (torch.rand(batch, size, size, generator=g) > 0.5).float()}
    return images, targets


def timed_steps(step, optimizer, images, targets, steps: int) -> list[float]:
    """Seconds of each full training step (forward + loss + backward + optimizer)."""
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        losses, _ = step(images, targets)
        losses["loss"].backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
    return times


def child(name: str, steps: int, batch: int | None, backend: str = "inductor") -> dict:
    """One process: eager steps, then compiled steps (the first one compiles)."""
    import torch

    import textdet
    from textdet.build import parts, training
    from textdet.config import load_config
    from textdet.engine.step import ForwardAndLoss, compile_step, enable_compile_cache
    from textdet.runtime.amp import amp_settings

    spec = MODELS[name]
    batch = batch or spec["batch"]
    config = spec["config"] or os.path.join(os.path.dirname(textdet.__file__), "recipes",
                                            "synthetic_dbnet_r18.yaml")
    cfg = load_config(config, ["model.pretrained=False", "model.backbone.pretrained=False"])
    torch.manual_seed(0)
    model = parts.build_model_from_config(cfg, pretrained_backbone=False).train()
    model.to(memory_format=torch.channels_last)
    step = ForwardAndLoss(model, training.build_loss_from_config(cfg), amp_settings(spec["amp_level"], "cpu"))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    images, targets = random_batch(batch, spec["size"])
    eager = timed_steps(step, optimizer, images, targets, steps + 1)[1:]  # the first step warms oneDNN
    enable_compile_cache()
    compiled = compile_step(step, backend=backend)
    measured_start = time.perf_counter()
    first = timed_steps(compiled, optimizer, images, targets, 1)[0]
    later = timed_steps(compiled, optimizer, images, targets, steps)
    eager_ms = 1000 * sorted(eager)[len(eager) // 2]
    compiled_ms = 1000 * sorted(later)[len(later) // 2]
    return {"model": name, "backend": backend, "batch": batch, "size": spec["size"], "amp_level": spec["amp_level"],
            "threads": torch.get_num_threads(), "eager_step_ms": round(eager_ms, 1),
            "compiled_step_ms": round(compiled_ms, 1), "compiled_over_eager": round(compiled_ms / eager_ms, 3),
            "first_compiled_step_s": round(first, 1), "compile_s": round(first - compiled_ms / 1000, 1),
            "measured_s": round(time.perf_counter() - measured_start, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="recipe,r50")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--r50-batch", type=int, default=1)
    parser.add_argument("--backend", default="inductor", help="torch.compile backend (eager / aot_eager: the script's "
                        "own check, or dynamo's and AOTAutograd's share of the cost)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        import torch

        torch.set_num_threads(args.threads)
        batch = args.r50_batch if args.child == "r50" else None
        print(json.dumps(child(args.child, args.steps, batch, args.backend)), flush=True)
        return
    results = []
    for name in args.models.split(","):
        cache = tempfile.mkdtemp(prefix=f"textdet_compile_{name}_")
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
        for state in ("cold", "warm"):
            cmd = [sys.executable, __file__, "--child", name, "--steps", str(args.steps), "--threads",
                   str(args.threads), "--r50-batch", str(args.r50_batch), "--backend", args.backend]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if out.returncode:
                raise SystemExit(f"{name} {state}: exit {out.returncode}\n{out.stderr[-3000:]}")
            result = {"cache": state, **json.loads(out.stdout.strip().splitlines()[-1])}
            print(json.dumps(result), flush=True)
            results.append(result)
    print("model   cache  eager ms  compiled ms  compiled/eager  compile s")
    for r in results:
        print(f"{r['model']:<7} {r['cache']:<6} {r['eager_step_ms']:8.1f} {r['compiled_step_ms']:12.1f} "
              f"{r['compiled_over_eager']:15.3f} {r['compile_s']:10.1f}")


if __name__ == "__main__":
    main()
