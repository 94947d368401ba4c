"""Shared fixtures: a tiny synthetic data set and a tiny-model config built from the built-in recipe."""

from __future__ import annotations

import os

import pytest
import torch

from textdet.data.synth import generate_dataset

RECIPE = os.path.join(os.path.dirname(__file__), "..", "src", "textdet", "recipes", "synthetic_dbnet_r18.yaml")

torch.set_num_threads(2)


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
        "train.ckpt_save_dir": run_dir,
        "eval.ckpt_load_path": os.path.join(run_dir, "best.ckpt"),
        "model.backbone.width": 8,
        "model.neck.out_channels": 32,
        "train.dataset.transform_pipeline.6.RandomCropWithBBox.crop_size": "[64, 64]",
        "eval.dataset.transform_pipeline.2.DetResize.target_size": "[96, 128]",
        "train.loader.batch_size": 2,
        "train.loader.num_workers": 0,
        "eval.loader.batch_size": 2,
        "eval.loader.num_workers": 0,
        "scheduler.num_epochs": 2,
        "scheduler.warmup_epochs": 0,
        "system.log_interval": 2,
    }
    opts.update(extra)
    return [f"{k}={v}" for k, v in opts.items()]


@pytest.fixture()
def tiny_cfg_args(synth_root, tmp_path):
    """``(recipe_path, overrides, run_dir)`` for a tiny run in a temp folder."""
    run_dir = str(tmp_path / "run")
    return RECIPE, tiny_overrides(synth_root, run_dir), run_dir
