"""DB post-processing and its name -> class table."""

from __future__ import annotations

from typing import Any

from textdet.config.components import build_component
from textdet.postprocess.db_postprocess import DBPostprocess

POSTPROCESSES = {"DBPostprocess": DBPostprocess}


def build_postprocess(name: str, **kwargs: Any) -> DBPostprocess:
    """Build ``POSTPROCESSES[name](**kwargs)``; ConfigError names an unknown name, keyword or bad value."""
    return build_component(POSTPROCESSES, name, kwargs, "postprocess", "postprocess")


__all__ = ["POSTPROCESSES", "DBPostprocess", "build_postprocess"]
