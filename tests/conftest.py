"""Shared fixtures: a tiny synthetic data set and a tiny-model config built from the built-in recipe."""

from __future__ import annotations

import os

import cv2
import numpy as np
import pytest
import torch

from textdet.data.synth import generate_dataset

RECIPE = os.path.join(os.path.dirname(__file__), "..", "src", "textdet", "recipes", "synthetic_dbnet_r18.yaml")
# The user's MindOCR file exactly as they wrote it, kept in the repository (configs/).
USER_CFG = os.path.join(os.path.dirname(__file__), "..", "configs", "mindocr_db_r50_user.yaml")


def box(x0: int, y0: int, x1: int, y1: int) -> list[list[int]]:
    """An axis-aligned box as four corners, clockwise from the top left."""
    return [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]

torch.set_num_threads(2)
# Tests never reach the internet: pretrained=True / URLs resolve from the cache or fail at once.
os.environ.setdefault("TEXTDET_OFFLINE", "1")


@pytest.fixture(scope="session")
def synth_root(tmp_path_factory) -> str:
    """12 train and 4 val images of 128x96 px (generated once per test session)."""
    root = tmp_path_factory.mktemp("synth")
    generate_dataset(str(root), n_train=12, n_val=4, seed=0, size=(128, 96), progress=False)
    return str(root)


def tiny_overrides(root: str, run_dir: str, **extra) -> list[str]:
    """-o overrides turning the built-in recipe into a seconds-long CPU run on ``root``."""
    opts = {
        "train.dataset.dataset_root": root,
        "eval.dataset.dataset_root": root,
        "eval.dataset.data_dir": "val/images",  # the tiny set has no held-out split
        "eval.dataset.label_file": "test_gt.txt",
        "train.ckpt_save_dir": run_dir,
        "eval.ckpt_load_path": os.path.join(run_dir, "best.ckpt"),
        "model.backbone.width": 8,
        "model.neck.out_channels": 32,
        "train.dataset.transform_pipeline.RandomCropWithBBox.crop_size": "[64, 64]",
        "eval.dataset.transform_pipeline.DetResize.target_size": "[96, 128]",
        "train.loader.batch_size": 2,
        "train.loader.num_workers": 0,
        "eval.loader.batch_size": 2,
        "eval.loader.num_workers": 0,
        "scheduler.num_epochs": 2,
        "scheduler.warmup_epochs": 0,
        "system.log_interval": 2,
        "system.amp_level": "O0",  # fp32: the same numbers on every CPU (the recipe's bf16 is tested in test_precision)
    }
    opts.update(extra)
    return [f"{k}={v}" for k, v in opts.items()]


@pytest.fixture()
def tiny_cfg_args(synth_root, tmp_path):
    """``(recipe_path, overrides, run_dir)`` for a tiny run in a temp folder."""
    run_dir = str(tmp_path / "run")
    return RECIPE, tiny_overrides(synth_root, run_dir), run_dir


def coverage(polys: list[np.ndarray], shape: tuple[int, int], k: int = 16) -> np.ndarray:
    """(H, W) float32 fraction of each pixel covered by the polygons (fillPoly's closed boundary
    makes it about 1/(2k) px too large on every side)."""
    h, w = shape
    hi = np.zeros((h * k, w * k), np.uint8)
    for p in polys:
        q = (np.asarray(p, np.float64) + 0.5) * k - 0.5
        cv2.fillPoly(hi, [np.round(q * 16).astype(np.int32)], 255, lineType=cv2.LINE_8, shift=4)
    return cv2.resize(hi, (w, h), interpolation=cv2.INTER_AREA).astype(np.float32) / 255


def save_tiny_model(synth_root: str, run: str):
    """A width-8 DBNet (neck 32 channels) of the tiny config, random init with seed 1, saved as
    ``run/model.ckpt`` = ``{"model": state_dict}``; returns (overrides, config, eval-mode model, ckpt path)."""
    from textdet.build import parts
    from textdet.config import load_config

    opts = tiny_overrides(synth_root, run)
    cfg = load_config(RECIPE, opts)
    torch.manual_seed(1)
    model = parts.build_model_from_config(cfg, pretrained_backbone=False).eval()
    ckpt = os.path.join(run, "model.ckpt")
    torch.save({"model": model.state_dict()}, ckpt)
    return opts, cfg, model, ckpt
