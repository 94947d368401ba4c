"""Shape buckets for evaluation (``eval.shape_buckets``): each resized image is padded at the bottom/right to
the smallest of a few [H, W] shapes, so a data set of many sizes runs through a handful of input shapes (a
graph compiler builds one graph per shape: PaddleOCR users on Ascend wait minutes for every new one), and
images of a batch share one shape (``eval.loader.batch_size`` > 1). ``valid_hw`` records each image's real
region so that post-processing ignores the padding."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from PIL import Image
from torch.utils.data import Sampler

from textdet.data.dataset import collate
from textdet.data.resize import DetResize, pad_bottom_right
from textdet.errors import DataError

AUTO_MAX_BUCKETS = 4  # `auto`: at most this many shapes
KEY = "eval.shape_buckets"  # checked at config load: config.loader.parse_buckets
_EXIF_ORIENTATION = 0x0112
_EXIF_TRANSPOSED = (5, 6, 7, 8)  # orientations whose decoded image is the stored one turned a quarter


def choose_buckets(
    sizes: Sequence[tuple[int, int]], max_buckets: int = AUTO_MAX_BUCKETS
) -> list[tuple[int, int]]:
    """``auto``: at most ``max_buckets`` shapes covering every (h, w) in ``sizes``, padding few pixels.
    Starting from one bucket per distinct size, the two groups whose merged bucket (the larger height and the
    larger width) adds the fewest padded pixels over their images are merged, until ``max_buckets`` remain
    (ties: the first pair in (height, width) order). Returned smallest area first."""
    counts = Counter((int(h), int(w)) for h, w in sizes)
    groups = sorted(counts)
    heights = np.array([g[0] for g in groups], dtype=np.int64)
    widths = np.array([g[1] for g in groups], dtype=np.int64)
    images = np.array([counts[g] for g in groups], dtype=np.int64)
    while len(heights) > max_buckets:
        merged_area = np.maximum.outer(heights, heights) * np.maximum.outer(widths, widths)
        cost = images * heights * widths
        added = np.add.outer(images, images) * merged_area - np.add.outer(cost, cost)
        added[np.tril_indices(len(heights))] = np.iinfo(np.int64).max  # pairs i < j only
        i, j = np.unravel_index(int(np.argmin(added)), added.shape)
        heights[i], widths[i], images[i] = (
            max(heights[i], heights[j]),
            max(widths[i], widths[j]),
            images[i] + images[j],
        )
        heights, widths, images = (np.delete(a, j) for a in (heights, widths, images))
    shapes = {(int(h), int(w)) for h, w in zip(heights, widths, strict=True)}
    return sorted(shapes, key=lambda s: (s[0] * s[1], s))


def bucket_for(size: tuple[int, int], buckets: Sequence[tuple[int, int]]) -> int:
    """Index of the smallest-area bucket (``buckets`` sorted by area) that holds an (h, w) image."""
    for index, (height, width) in enumerate(buckets):
        if size[0] <= height and size[1] <= width:
            return index
    raise DataError(
        f"{KEY}: an image resized to {size[0]}x{size[1]} fits none of the buckets "
        f"{[list(b) for b in buckets]}; add a larger [H, W] or use auto"
    )


def stored_size(path: str, honour_orientation: bool = True) -> tuple[int, int]:
    """(h, w) of an image file as DecodeImage returns it, from its header alone (EXIF quarter turns
    applied)."""
    try:
        with Image.open(path) as image:
            width, height = image.size
            turned = honour_orientation and image.getexif().get(_EXIF_ORIENTATION) in _EXIF_TRANSPOSED
    except OSError as e:
        raise DataError(f"{KEY}: cannot read the size of {path}: {e}") from None
    return (width, height) if turned else (height, width)


def resized_size(size: tuple[int, int], resize: DetResize | None) -> tuple[int, int]:
    """The (h, w) the eval pipeline's DetResize gives an (h, w) image (its own size without one)."""
    if resize is None:
        return size
    height, width, pad = resize.output_size(*size)
    return resize.target_size if pad else (height, width)


def pad_channels_first(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Zero-pad a (C, h, w) image at the bottom/right to ``size`` (H, W) >= (h, w)."""
    padded = pad_bottom_right(image.transpose(1, 2, 0), size)  # pad_bottom_right pads (H, W, C)
    return np.ascontiguousarray(padded.transpose(2, 0, 1))


class BucketBatchSampler(Sampler):
    """Batches of ``batch_size`` sample keys of one bucket each, in the order the ``sampler`` gives them: a
    batch is yielded when its bucket has filled one, the part-filled ones at the end (smallest bucket first).
    Evaluation order changes nothing: the metric sums over images."""

    def __init__(self, sampler: Sampler, bucket_of: Sequence[int], batch_size: int) -> None:
        self.sampler = sampler
        self.bucket_of = list(bucket_of)
        self.batch_size = int(batch_size)

    def _bucket(self, key: Any) -> int:
        index = key[1] if isinstance(key, tuple) else key  # EpochSampler yields (epoch, index)
        return self.bucket_of[index]

    def __len__(self) -> int:
        per_bucket = Counter(self._bucket(key) for key in self.sampler)
        return sum(-(-count // self.batch_size) for count in per_bucket.values())

    def __iter__(self) -> Iterator[list]:
        open_batches: dict[int, list] = {}
        for key in self.sampler:
            batch = open_batches.setdefault(self._bucket(key), [])
            batch.append(key)
            if len(batch) == self.batch_size:
                yield batch
                open_batches[self._bucket(key)] = []
        for bucket in sorted(open_batches):
            if open_batches[bucket]:
                yield open_batches[bucket]


class PadCollate:
    """Collate samples of different sizes: each image padded (zeros, bottom/right) to one shape, the smallest
    bucket holding the batch's largest height and width (without buckets: that height and width), and
    ``valid_hw`` (N, 2) int64 = each image's real (h, w); a batch that needs no padding is collated as it is.
    Images: float (C, H, W), normalised in the workers, or uint8 (H, W, C)."""

    def __init__(self, buckets: Sequence[tuple[int, int]] | None = None) -> None:
        self.buckets = list(buckets) if buckets else None

    def __repr__(self) -> str:
        return f"PadCollate(buckets={self.buckets})"

    def __call__(self, samples: list[dict]) -> dict[str, Any]:
        channels_first = samples[0]["image"].dtype != np.uint8
        sizes = [s["image"].shape[1:3] if channels_first else s["image"].shape[:2] for s in samples]
        target = (max(size[0] for size in sizes), max(size[1] for size in sizes))
        if self.buckets is not None:
            target = self.buckets[bucket_for(target, self.buckets)]
        if all(tuple(size) == target for size in sizes):  # nothing to pad: the plain batch, no mask to apply
            return collate(samples)
        padded = []
        for sample, size in zip(samples, sizes, strict=True):
            image = sample["image"]
            if channels_first:
                image = pad_channels_first(image, target)
            else:
                image = pad_bottom_right(image, target)
            padded.append({**sample, "image": image, "valid_hw": np.array(size, dtype=np.int64)})
        return collate(padded)
