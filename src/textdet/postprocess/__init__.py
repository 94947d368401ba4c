"""DB post-processing and its name -> class table."""

from __future__ import annotations

import inspect
from typing import Any

from textdet.errors import ConfigError
from textdet.postprocess.db_postprocess import DBPostprocess

POSTPROCESSES = {"DBPostprocess": DBPostprocess}


def build_postprocess(name: str, **kwargs: Any) -> DBPostprocess:
    """Build the post-processor called ``name`` (a key of ``POSTPROCESSES``) from plain keyword arguments.

    Raises:
        ConfigError: unknown name (lists the valid ones), a keyword the class does not take, or a bad value.
    """
    if name not in POSTPROCESSES:
        raise ConfigError(f"postprocess.name: unknown post-process {name!r}; valid names: {sorted(POSTPROCESSES)}")
    cls = POSTPROCESSES[name]
    params = [k for k in inspect.signature(cls.__init__).parameters if k != "self"]
    unknown = sorted(k for k in kwargs if k not in params)
    if unknown:
        raise ConfigError(f"postprocess: {name} does not take {unknown}; valid keys: {sorted(params)}")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"postprocess: {name}: {e}") from e


__all__ = ["POSTPROCESSES", "DBPostprocess", "build_postprocess"]
