"""Which config a command runs: the YAML given with ``-c``, else the built-in synthetic recipe on its data
set, generated on first use (no download). Torch-free: ``textdet train`` reads its config before
``import torch``."""

from __future__ import annotations

import argparse
import os
import shutil

from textdet import textdet_home
from textdet.config import Config, load_config

RECIPE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "recipes", "synthetic_dbnet_r18.yaml")
SYNTH_SETTINGS = {"n_train": 2000, "n_val": 50, "seed": 0, "size": (320, 320), "n_heldout": 100}


def builtin_data_root() -> str:
    """The built-in data set's folder, named after its settings so that new settings make a new folder."""
    settings = SYNTH_SETTINGS
    width, height = settings["size"]
    name = (f"synth_{width}x{height}_{settings['n_train']}_{settings['n_val']}_{settings['n_heldout']}"
            f"_s{settings['seed']}")
    return os.path.join(textdet_home(), name)


def ensure_builtin_data() -> bool:
    """Generate the built-in synthetic data set on first use; True when it was generated now."""
    from textdet.data.synth import generate_dataset

    settings = SYNTH_SETTINGS
    root = builtin_data_root()
    if os.path.isfile(os.path.join(root, "heldout_gt.txt")):
        return False
    print(f"textdet: generating the built-in synthetic data set in {root} (once)", flush=True)
    tmp = root + ".partial"
    generate_dataset(tmp, settings["n_train"], settings["n_val"], seed=settings["seed"],
                     size=settings["size"], n_heldout=settings["n_heldout"])
    if os.path.isdir(root):
        shutil.rmtree(root)
    os.replace(tmp, root)
    return True


def load_cfg(args: argparse.Namespace) -> Config:
    """``-c`` with its ``-o`` overrides, else the built-in recipe (on its generated data unless ``-o`` points
    both data roots elsewhere)."""
    if getattr(args, "config", None):
        return load_config(args.config, args.opt)
    base = []
    if needs_builtin_data(args.opt):
        ensure_builtin_data()
        root = builtin_data_root()
        base = [f"train.dataset.dataset_root={root}", f"eval.dataset.dataset_root={root}"]
    return load_config(RECIPE, base + list(args.opt))


def needs_builtin_data(opts: list[str]) -> bool:
    """The built-in recipe needs its generated data unless ``-o`` points both data roots elsewhere."""
    if not opts:
        return True
    keys = {option.split("=", 1)[0].strip() for option in opts}
    return not {"train.dataset.dataset_root", "eval.dataset.dataset_root"} <= keys
