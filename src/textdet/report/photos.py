"""One model's evaluation photo by photo: each photo's detections and labels sorted into error kinds and
scored alone, and the split's tally: what the report's tables, figures and gallery are drawn from."""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from textdet.metrics.error_kinds import ErrorTally, ImageErrors, image_errors

# Detection kinds that are errors (a photo's error count); "ignored" (in a ### region) is not.
WRONG_DETECTIONS = ("merged", "loose", "fragment", "background")


@dataclass
class Photo:
    """A photo's detections ``polys`` and labels ``gts`` (polygons (P, 2) in original-image pixels),
    ``ignore_tags`` (True: ``###``), their ``errors`` and the metric's ``counts`` for this photo alone
    ([recall sum, precision sum, care detections, care words], as ``DetMetric.counts``)."""

    path: str
    polys: list[np.ndarray]
    gts: list[np.ndarray]
    ignore_tags: np.ndarray
    errors: ImageErrors
    counts: np.ndarray

    @property
    def fscore(self) -> float:
        """The photo's f-score; 1 for a photo with no word and no detection that counts (nothing to get
        wrong)."""
        recall_sum, precision_sum, n_det, n_gt = (float(c) for c in self.counts)
        if n_det == 0 and n_gt == 0:
            return 1.0
        recall = recall_sum / n_gt if n_gt else 0.0
        precision = precision_sum / n_det if n_det else 0.0
        return 2 * precision * recall / (precision + recall) if precision + recall else 0.0

    @property
    def n_errors(self) -> int:
        """Words not found plus detections that are wrong (merged, loose, fragment, on nothing)."""
        words = sum(kind not in (None, "found") for kind in self.errors.words)
        return words + sum(kind in WRONG_DETECTIONS for kind in self.errors.detections)

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


@dataclass
class ModelRun:
    """One model's evaluation for the report: ``result`` is ``textdet eval``'s dict (recall, precision,
    f-score, checkpoint, sweep when run), ``thresholds`` the post-processing pair used and ``source`` where
    each came from."""

    label: str
    result: dict
    photos: list[Photo]
    thresholds: dict[str, float]
    source: dict[str, str]

    def tally(self) -> ErrorTally:
        """The error kinds summed over the photos."""
        tally = ErrorTally()
        for photo in self.photos:
            tally.add(photo.errors)
        return tally

    def by_path(self) -> dict[str, Photo]:
        return {photo.path: photo for photo in self.photos}


def score_photos(per_image: Sequence[dict[str, Any]], metric) -> list[Photo]:
    """``Evaluator.per_image``'s records (img_path, polys, gts, ignore_tags) as Photos; ``metric`` (a
    ``DetMetric``, copied, not changed) scores each photo alone, under the evaluation's protocol."""
    alone = copy.deepcopy(metric)
    photos = []
    for record in per_image:
        if record["img_path"] is None:
            raise ValueError("per-image records without img_path: eval.dataset.output_columns needs img_path")
        alone.reset()
        alone.update([record["polys"]], [record["gts"]], [record["ignore_tags"]])
        errors = image_errors(record["polys"], record["gts"], record["ignore_tags"])
        photos.append(Photo(record["img_path"], list(record["polys"]), list(record["gts"]),
                            np.asarray(record["ignore_tags"], dtype=bool), errors, alone.counts()))
    return photos


def worst_first(photos: Sequence[Photo]) -> list[Photo]:
    """Lowest f-score first; among equal ones, the most errors first, then by name (a stable page)."""
    return sorted(photos, key=lambda photo: (photo.fscore, -photo.n_errors, photo.path))


@dataclass
class PhotoPair:
    """The same photo under two models: ``change`` = f-score of ``main`` minus that of ``other``; the words
    only one of them finds (indices into the photo's labels)."""

    main: Photo
    other: Photo

    @property
    def change(self) -> float:
        return self.main.fscore - self.other.fscore

    def only_found_by(self, which: str) -> list[int]:
        first, second = (self.main, self.other) if which == "main" else (self.other, self.main)
        return [i for i, (a, b) in enumerate(zip(first.errors.words, second.errors.words, strict=True))
                if a == "found" and b != "found"]


def pair_photos(main: ModelRun, other: ModelRun) -> list[PhotoPair]:
    """Photos both runs scored, by the change (the most worsened first, the most improved last)."""
    others = other.by_path()
    pairs = [PhotoPair(photo, others[photo.path]) for photo in main.photos if photo.path in others]
    for pair in pairs:
        if len(pair.main.gts) != len(pair.other.gts):
            raise ValueError(f"{pair.main.path}: the two evaluations read different labels")
    return sorted(pairs, key=lambda pair: (pair.change, pair.main.path))
