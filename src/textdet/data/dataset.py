"""DetDataset, its sampler, collate and the loader builder. A sample's randomness comes from ``(seed, epoch,
index)``: reproducible whatever the number of workers, and persistent workers need no epoch hand-off."""

from __future__ import annotations

import ctypes
import logging
import math
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import cv2
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler, default_collate

from textdet.data.cache import CachedDecode, cacheable, plan_cache
from textdet.data.labels import LabelRecord, Problem, check_dataset_paths, read_label_files
from textdet.errors import DataError, SampleError

logger = logging.getLogger("textdet.data")

# A sample that fails is replaced by another one; give up after this many failures in a row.
_MAX_RETRIES = 20
# Per-image values whose length varies: always batched as lists, whatever the batch holds.
RAGGED_KEYS = frozenset({"polys", "texts", "ignore_tags", "img_path"})


class DetDataset(Dataset):
    """Label-file records run through ``transform(sample, rng)``; ``cache_images``: True/False/"auto"
    (data.cache).

    ``min_samples`` (``min_epoch_samples``): a set of fewer records is passed over ``repeats`` whole times
    per epoch, each pass with its own random draws (the sample's position seeds them, not its record).
    """

    def __init__(self, dataset_root: str, data_dir: str, label_file: str | Sequence[str],
                 transform: Callable[[dict, np.random.Generator], dict], output_columns: Sequence[str],
                 sample_ratio: float = 1.0, seed: int = 0, config_prefix: str = "dataset",
                 cache_images: bool | str = False, aside_every: int = 0, aside_only: bool = False,
                 min_samples: int = 0):
        image_dir, files = check_dataset_paths(dataset_root, data_dir, label_file, config_prefix)
        if not output_columns:
            raise DataError(f"{config_prefix}.output_columns is empty: list the sample keys to return")
        records, problems = read_label_files(files, dataset_root, sample_ratio, seed)
        if aside_every:
            total = len(records)
            records = set_aside(records, aside_every, aside_only)
            if not records:
                part = "is set aside" if aside_only else "is left to train on"
                raise DataError(f"{config_prefix}: none of its {total} labelled photos {part} when "
                                f"every {aside_every}th one is (train.guard_holdout): change "
                                "train.guard_holdout or add photos")
        self.problems: list[Problem] = list(problems)
        self.records: list[LabelRecord] = []
        for r in records:
            if os.path.isfile(os.path.join(image_dir, r.rel_path)):
                self.records.append(r)
            else:
                self.problems.append(Problem(r.label_file, r.line_no, f"image not found: {r.rel_path}", "error"))
        if not self.records:
            raise DataError(f"no usable samples in {', '.join(files)} under {image_dir} "
                            f"({len(self.problems)} problems; run `textdet check-data -c CFG` to list them)")
        self.image_dir = image_dir
        self.repeats = max(1, math.ceil(min_samples / len(self.records)))
        self.transform = transform
        self.output_columns = list(output_columns)
        self.seed = seed
        self.cache = None
        steps = getattr(transform, "transforms", None)
        if cache_images is not False and steps and cacheable(steps[0]):
            paths = [os.path.join(image_dir, r.rel_path) for r in self.records]
            self.cache = plan_cache(cache_images, paths, f"{config_prefix}.cache_images")
            if self.cache is not None:
                steps[0] = CachedDecode(steps[0], self.cache)

    def __len__(self) -> int:
        return len(self.records) * self.repeats

    def load(self, index: int, rng: np.random.Generator) -> dict:
        """Run one record through the pipeline; raises SampleError when it cannot be used."""
        r = self.records[index]
        sample = self.transform({"img_path": os.path.join(self.image_dir, r.rel_path), "label": r.annotations,
                                 "label_file": r.label_file, "line_no": r.line_no}, rng)
        missing = [c for c in self.output_columns if c not in sample]
        if missing:
            raise SampleError(f"the pipeline produced no {missing} (output_columns); add the transform that makes it")
        return sample

    def __getitem__(self, key: int | tuple[int, int]) -> dict:
        epoch, position = key if isinstance(key, tuple) else (0, key)
        index = position % len(self.records)  # the record; a repeated set's passes differ by position
        skipped = []
        for attempt in range(_MAX_RETRIES):
            rng = np.random.default_rng([self.seed, epoch, position, attempt])
            try:
                sample = self.load(index, rng)
            except SampleError as e:
                r = self.records[index]
                logger.warning("skipped %s (%s:%d): %s", r.rel_path, r.label_file, r.line_no, e)
                skipped.append(index)
                index = int(rng.integers(len(self.records)))  # as MindOCR: replace by another sample
                continue
            return {**{c: sample[c] for c in self.output_columns}, "_skipped": len(skipped)}
        raise DataError(f"{_MAX_RETRIES} samples in a row failed (last: {self.records[index].rel_path}); "
                        "run `textdet check-data -c CFG` to list the problems")


def set_aside(records: list, every: int, aside_only: bool) -> list:
    """The records set aside (``aside_only``) or the rest: every ``every``-th one (the every-th,
    2*every-th, ...) in label-file order is set aside, so the two parts never share a photo and a resume
    picks the same ones."""
    return [record for position, record in enumerate(records, 1) if (position % every == 0) == aside_only]


class EpochSampler(Sampler):
    """``(epoch, index)`` keys, shuffled per epoch from the seed, sharded over ranks (``pad``: equal steps per rank).

    The epoch's order is one permutation the ranks take in turns (rank r: positions r, r + W, ...), so the first
    ``k x W`` positions are what ``W`` ranks used in ``k`` samples each, whatever their number: ``skip`` counts
    those global positions, and a resume on another number of ranks continues after exactly them."""

    def __init__(self, n: int, shuffle: bool, seed: int, rank: int = 0, world_size: int = 1, pad: bool = True):
        self.n = n
        self.shuffle = shuffle
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.pad = pad
        self.epoch = self.skip = 0

    def set_epoch(self, epoch: int, skip: int = 0) -> None:
        """``skip``: samples of this epoch's order already trained, by all ranks together (a mid-epoch resume
        continues after them)."""
        self.epoch = epoch
        self.skip = skip

    def _shard_size(self, remaining: int) -> int:
        if self.pad:
            return math.ceil(remaining / self.world_size)
        return len(range(self.rank, remaining, self.world_size))

    @property
    def per_rank(self) -> int:
        """Samples of a whole epoch on this rank."""
        return self._shard_size(self.n)

    def __len__(self) -> int:
        return self._shard_size(max(self.n - self.skip, 0))

    def __iter__(self) -> Iterator[tuple[int, int]]:
        rng = np.random.default_rng([self.seed, self.epoch, 7919])
        order = rng.permutation(self.n) if self.shuffle else np.arange(self.n)
        remaining = order[self.skip :]
        total = math.ceil(len(remaining) / self.world_size) * self.world_size if self.pad else len(remaining)
        if total > len(remaining):  # pad by wrapping so every rank gets the same number of samples
            remaining = np.concatenate([remaining, order[: total - len(remaining)]])
        for i in remaining[self.rank : total : self.world_size]:
            yield (self.epoch, int(i))


def collate(samples: list[dict]) -> dict[str, Any]:
    """Stack same-shaped arrays into tensors; keep ragged values (polygons, tags) as lists."""
    batch: dict[str, Any] = {}
    for key in samples[0]:
        values = [s[key] for s in samples]
        if key == "_skipped":
            batch[key] = int(sum(values))
        elif (key not in RAGGED_KEYS and all(isinstance(v, np.ndarray) for v in values)
              and len({v.shape for v in values}) == 1):
            # torch's default_collate stacks into shared memory in a loader worker: the hand-off then copies nothing
            batch[key] = default_collate([torch.from_numpy(np.ascontiguousarray(v)) for v in values])
        else:
            batch[key] = values
    return batch


def keep_freed_memory(worker_id: int | None = None) -> bool:
    """Let glibc keep freed buffers in the heap (no mmap below 32 MiB, trim above 64 MiB), in a loader worker
    or the process that runs the pipeline: a 640x640 sample allocates about 15 MB of arrays, and returned to
    the kernel, their pages fault again on the next sample (1,857 faults, 2 to 4 ms of an 8 ms sample here).
    False without glibc."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this process already uses
    except (OSError, AttributeError, TypeError):
        return False
    return mallopt(-3, 32 << 20) == 1 and mallopt(-1, 64 << 20) == 1  # M_MMAP_THRESHOLD (64-bit max), M_TRIM_THRESHOLD


def build_loader(
    dataset: DetDataset, batch_size: int, shuffle: bool, drop_remainder: bool, num_workers: int, seed: int,
    rank: int = 0, world_size: int = 1, pin_memory: bool = False, prefetch_factor: int = 2,
    persistent_workers: bool = True, pad_shards: bool = True, collate_fn: Callable = collate,
    batches: Callable[[Sampler, int], Sampler] | None = None,
) -> DataLoader:
    """A DataLoader over ``dataset`` with per-sample seeding and rank sharding; ``batches(sampler,
    batch_size)``: a batch sampler over the rank's samples (the shape buckets of evaluation), else batches in
    sampler order."""
    sampler = EpochSampler(len(dataset), shuffle, seed, rank, world_size, pad=pad_shards)
    if drop_remainder and len(sampler) < batch_size:
        raise DataError(f"the data set has {len(dataset)} samples ({len(sampler)} per process) but batch_size is "
                        f"{batch_size} with drop_remainder: True, so an epoch would have no step; lower the batch size")
    kwargs: dict[str, Any] = {}
    if num_workers > 0:
        # A forked worker touching OpenCV's thread pool (made when this process ran cv2 before) deadlocks: OpenCV
        # runs single-threaded from here on, the workers are the parallelism.
        cv2.setNumThreads(0)
        kwargs = dict(prefetch_factor=prefetch_factor, persistent_workers=persistent_workers,
                      worker_init_fn=keep_freed_memory)
    else:  # the pipeline runs in this process
        keep_freed_memory()
    if batches is not None:
        kwargs["batch_sampler"] = batches(sampler, batch_size)
    else:
        kwargs.update(batch_size=batch_size, sampler=sampler, drop_last=drop_remainder)
    return DataLoader(
        dataset, num_workers=num_workers, collate_fn=collate_fn, pin_memory=pin_memory, **kwargs
    )
