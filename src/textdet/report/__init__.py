"""The evaluation report (``textdet eval --report``): a static page of one model's evaluation, or of two
models on the same photos, with the error kinds, figures and every photo drawn."""

from __future__ import annotations

from textdet.report.photos import ModelRun, Photo, score_photos
from textdet.report.write import write_report

__all__ = ["ModelRun", "Photo", "score_photos", "write_report"]
