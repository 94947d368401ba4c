"""DB post-processing and its name -> class table."""

from __future__ import annotations

from typing import Any

from textdet.config.components import build_component
from textdet.postprocess.db_postprocess import DBPostprocess

POSTPROCESSES = {"DBPostprocess": DBPostprocess}


def build_postprocess(name: str, **kwargs: Any) -> DBPostprocess:
    """Build the postprocess called ``name`` (a key of ``POSTPROCESSES``) from plain keyword arguments.

    Raises:
        ConfigError: unknown name (lists the valid ones), a keyword the class does not take, or a bad value.
    """
    return build_component(POSTPROCESSES, name, kwargs, "postprocess", "postprocess")


__all__ = ["POSTPROCESSES", "DBPostprocess", "build_postprocess"]
