"""Config sections whose objects need no torch: the data pipelines, post-processing and the metric.
Built here for start-up validation (before ``import torch``) and for ``engine.build``; errors name the
key's YAML line."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from textdet.config import Config
from textdet.config.components import build_component
from textdet.config.loader import located
from textdet.data.pipeline import Compose, build_transforms
from textdet.data.targets import ShrinkBinaryMap
from textdet.errors import ConfigError


def build_section(cfg: Config, key: str, table: Mapping[str, Callable[..., Any]]) -> Any:
    """Build a ``{name: ..., **kwargs}`` section from its name -> class table, errors located at its YAML
    line."""
    spec = dict(getattr(cfg, key))
    with located(cfg, key):
        return build_component(table, spec.pop("name", None), spec, key, key)


def build_pipeline(cfg: Config, split: str, fuse: bool = True) -> Compose:
    """The transform pipeline of ``split`` (train or eval); ``fuse=False`` keeps the sequential reference
    transforms (benchmarks compare the two)."""
    key = f"{split}.dataset.transform_pipeline"
    pipeline = getattr(cfg, split).dataset.transform_pipeline
    if not pipeline:
        raise ConfigError(f"{key} is empty: list the transforms (see the MindOCR det configs)")
    with located(cfg, key):
        return build_transforms(pipeline, fuse=fuse)


def train_shrink(cfg: Config) -> ShrinkBinaryMap | None:
    """The training pipeline's ShrinkBinaryMap, whose min_text_size and shrink_ratio decide which labels
    split (data/label_shapes.py); None when the pipeline draws no DB target."""
    transforms = build_pipeline(cfg, "train", fuse=False).transforms
    return next((t for t in transforms if isinstance(t, ShrinkBinaryMap)), None)
