"""The user's training pipeline, fused against the per-transform reference, on 1280x720 JPEGs.

Run: ``python benchmarks/speed/bench_pipeline.py [--config USER_YAML] [--images 16] [--repeats 3]
[--threads 1]``

Builds the user's ``train.dataset.transform_pipeline`` (mindocr_db_r50_user.yaml: RandomScale up to
3x, 640x640 crop, ShrinkBinaryMap, BorderMap, ...) through ``textdet.build.parts``, in four arms:
- ``fused``: ``fuse=True`` (one affine warp straight into the crop, one fused normalise), no image cache;
- ``reference``: ``fuse=False``, the sequential reference transforms, no image cache;
- ``fused + image cache``: what ``textdet train`` runs on a CPU from the second epoch on (decoded
  images come from the shared-memory cache, filled before timing);
- ``fused + cache, GPU norm.``: the same with NormalizeImage + ToCHWImage moved to the device, as
  the trainer runs it on CUDA.
The fused/reference ratio compares the transforms alone (both decode every JPEG). Each sample goes
through ``DetDataset.load`` with the same seed in every arm, the arms interleaved sample by sample so
that load from other processes hits all of them; one process, OpenCV and torch limited to
``--threads`` (1 = one core, the unit of the "x MindOCR per core" goal). A script, not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import cv2
import numpy as np
import torch

from textdet.build import parts
from textdet.config import load_config
from textdet.data.synth import generate_dataset
from textdet.runtime.feed import split_device_normalize

HERE = os.path.dirname(os.path.abspath(__file__))
USER_YAML_CANDIDATES = (
    os.path.join(HERE, "..", "..", "configs", "mindocr_db_r50_user.yaml"),
)


def default_config() -> str | None:
    return next((p for p in USER_YAML_CANDIDATES if os.path.isfile(p)), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=default_config(), help="the user's MindOCR YAML")
    parser.add_argument("--data", help="synthetic data folder (default: generated in a temp folder)")
    parser.add_argument("--images", type=int, default=16, help="synthetic 1280x720 training images")
    parser.add_argument("--repeats", type=int, default=3, help="passes over the images (different seeds)")
    parser.add_argument("--threads", type=int, default=1, help="OpenCV and torch threads")
    args = parser.parse_args()
    if not args.config:
        parser.error("the user's config was not found; pass --config mindocr_db_r50_user.yaml")
    cv2.setNumThreads(args.threads)
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    root = args.data or os.path.join(tempfile.mkdtemp(prefix="textdet_pipeline_"), "synth")
    if not os.path.isfile(os.path.join(root, "train_gt.txt")):
        generate_dataset(root, n_train=args.images, n_val=0, seed=0, size=(1280, 720), progress=False)
    base = [f"train.dataset.dataset_root={root}"]
    plain = load_config(args.config, base + ["train.dataset.cache_images=false"])
    cached = load_config(args.config, base + ["train.dataset.cache_images=true"])
    pipes = {
        "fused": parts.build_pipeline(plain, "train", fuse=True),
        "reference": parts.build_pipeline(plain, "train", fuse=False),
        "fused + image cache": parts.build_pipeline(cached, "train", fuse=True),
        "fused + cache, GPU norm.": split_device_normalize(parts.build_pipeline(cached, "train"), True)[0],
    }
    datasets = {name: parts.build_dataset(cached if "cache" in name else plain, "train", pipe)
                for name, pipe in pipes.items()}
    n = len(datasets["fused"])
    for ds in datasets.values():  # warm-up, untimed: first-call costs; the cached arms decode every image once
        for i in range(n if ds.cache is not None else 1):
            ds.load(i, np.random.default_rng(0))
    for pipe in pipes.values():
        pipe.timing = True
        pipe.reset_stats()
    times: dict[str, list[float]] = {name: [] for name in pipes}
    for rep in range(args.repeats):
        for i in range(n):
            names = list(pipes)
            names = names[i % len(names):] + names[:i % len(names)]
            for name in names:
                rng = np.random.default_rng([plain.system.seed, rep, i, 0])
                start = time.perf_counter()
                datasets[name].load(i, rng)
                times[name].append(time.perf_counter() - start)
    mean = {k: 1000 * statistics.fmean(v) for k, v in times.items()}
    med = {k: 1000 * statistics.median(v) for k, v in times.items()}
    print(f"user train pipeline ({os.path.basename(args.config)}) on {n} synthetic 1280x720 JPEGs x {args.repeats} "
          f"passes, one process, {args.threads} thread(s)")
    for name in pipes:
        print(f"  {name:<24} {mean[name]:7.1f} ms/sample (median {med[name]:.1f})  {1000 / mean[name]:6.1f} samples/s")
    print(f"  ratio reference / fused: x{mean['reference'] / mean['fused']:.2f} (means), "
          f"x{med['reference'] / med['fused']:.2f} (medians)")
    for name, pipe in pipes.items():
        per = {k: 1000 * v["seconds"] / max(v["count"], 1) for k, v in pipe.stats.items()}
        print(f"  per transform, {name} (ms): " + ", ".join(f"{k} {v:.2f}" for k, v in per.items()))
    print(f"  load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
