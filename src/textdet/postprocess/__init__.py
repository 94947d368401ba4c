"""DB post-processing and its name -> class table."""

from __future__ import annotations

from textdet.postprocess.db_postprocess import DBPostprocess

POSTPROCESSES = {"DBPostprocess": DBPostprocess}

__all__ = ["POSTPROCESSES", "DBPostprocess"]
