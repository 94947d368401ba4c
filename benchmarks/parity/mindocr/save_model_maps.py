"""Probability maps of a trained model on its eval images, for ``bench_vs_mindocr.py --maps``.

Run: ``python benchmarks/parity/mindocr/save_model_maps.py RUN_DIR --out maps.npy [--images 100]
[--ckpt best.ckpt]``

RUN_DIR is a ``textdet train`` run folder (``train_config.yaml`` and the checkpoint). The maps are what the
model gives for the config's eval images, in the config's eval resolution, as ``Detector`` hands them to
the post-processing: float32 (N, H, W) in ``--out``, the ``[src_h, src_w, scale_h, scale_w]`` rows in
``<out>_shape_list.npy``. Images of another resized size than the first are skipped (one array).
``textdet train`` with no config gives the built-in recipe's run folder and its 100 held-out images.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from textdet.build.parts import build_detector
from textdet.config import load_config
from textdet.predict import find_images


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", help="a textdet train run folder")
    ap.add_argument("--out", required=True, help="maps .npy to write (and <out>_shape_list.npy)")
    ap.add_argument("--images", type=int, default=100, help="eval images to run (default 100)")
    ap.add_argument("--ckpt", default="best.ckpt", help="checkpoint in the run folder (default best.ckpt)")
    args = ap.parse_args()
    cfg = load_config(os.path.join(args.run_dir, "train_config.yaml"))
    detector = build_detector(cfg, ckpt=os.path.join(args.run_dir, args.ckpt), device="cpu")
    maps: list[np.ndarray] = []
    shapes: list[np.ndarray] = []
    postprocess = detector.postprocess

    def keep(prob: np.ndarray, shape_list: np.ndarray) -> list[dict]:
        maps.extend(np.asarray(prob, np.float32)[:, 0])
        shapes.extend(np.asarray(shape_list, np.float32))
        return postprocess(prob, shape_list)

    detector.postprocess = keep
    ds = cfg.eval.dataset
    images = find_images([os.path.join(ds.dataset_root, ds.data_dir)])[: args.images]
    if not images:
        sys.exit(f"no images in {os.path.join(ds.dataset_root, ds.data_dir)} (the config's eval set)")
    detector(images)
    same = [i for i, m in enumerate(maps) if m.shape == maps[0].shape]
    np.save(args.out, np.stack([maps[i] for i in same]))
    np.save(os.path.splitext(args.out)[0] + "_shape_list.npy", np.stack([shapes[i] for i in same]))
    print(f"{len(same)} maps of {maps[0].shape} ({len(maps) - len(same)} of another size skipped) -> {args.out}")


if __name__ == "__main__":
    main()
