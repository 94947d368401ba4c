"""Feeding the device (MindOCR's ``dataset_sink_mode``, always on): on an accelerator a side stream copies (pinned,
non-blocking) and normalises batch k+1 while batch k computes; on the CPU it is a plain iterator. The
pipeline's trailing normalisation moves to the device (``split_device_normalize``), so workers ship uint8."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from textdet import device
from textdet.data.pipeline import Compose, FusedNormalize
from textdet.data.resize import NormalizeImage, ToCHWImage


def split_device_normalize(pipeline: Compose, enabled: bool = True) -> tuple[Compose, dict | None]:
    """(pipeline less a trailing NormalizeImage + ToCHWImage, their parameters) if ``enabled``, else (it,
    None)."""
    transforms = list(pipeline.transforms)
    norm = None
    if transforms and isinstance(transforms[-1], FusedNormalize):
        norm = transforms[-1].normalize
        rest = transforms[:-1]
    elif (len(transforms) >= 2 and isinstance(transforms[-1], ToCHWImage)
          and isinstance(transforms[-2], NormalizeImage)):
        norm = transforms[-2]
        rest = transforms[:-2]
    if not enabled or norm is None or not norm.is_hwc:
        return pipeline, None
    parameters = {"mean": norm.mean.reshape(-1).tolist(), "std": norm.std.reshape(-1).tolist(),
                  "swap_rb": bool(norm.bgr_to_rgb or norm.rgb_to_bgr)}
    return Compose(rest), parameters


class DeviceInput:
    """Moves a collated batch to ``device``; uint8 NHWC images become normalised float NCHW (channels_last in
    memory, as accelerator convolutions prefer); float NCHW images (normalised in workers) pass through."""

    def __init__(self, device: torch.device, normalize: dict | None = None, channels_last: bool = False,
                 image_key: str = "image", targets: Callable | None = None):
        self.device = device
        self.image_key = image_key
        self.channels_last = channels_last
        self.targets = targets  # DeviceTargets: the DB maps from the batch's polygon arrays, made on the device
        self.mean = self.std = None
        self.swap_rb = False
        if normalize is not None:
            self.mean = torch.tensor(normalize["mean"], dtype=torch.float32, device=device).view(1, -1, 1, 1)
            self.std = torch.tensor(normalize["std"], dtype=torch.float32, device=device).view(1, -1, 1, 1)
            self.swap_rb = bool(normalize.get("swap_rb", False))

    def images(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(self.device, non_blocking=True)
        if x.dtype == torch.uint8:
            x = x.permute(0, 3, 1, 2).float()  # NHWC uint8 -> NCHW float (channels_last memory)
            if self.swap_rb:
                x = x.flip(1)
            if self.mean is not None:
                x = (x - self.mean) / self.std
        elif self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        return x

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        out = {}
        skip = self.targets.columns if self.targets is not None else ()
        for k, v in batch.items():
            if k in skip:
                continue
            if k == self.image_key and torch.is_tensor(v):
                out[k] = self.images(v)
            elif torch.is_tensor(v) and k != "shape_list":
                out[k] = v.to(self.device, non_blocking=True)
            else:
                out[k] = v
        if self.targets is not None:
            out.update(self.targets(batch, out[self.image_key].shape[-2:], self.device))
        return out


class Prefetcher:
    """Iterates ``loader`` yielding device batches; ``wait`` after each ``next()`` holds the seconds the loop
    was blocked on data (the data-wait share in the logs), ``copy_seconds()`` the copy time of that batch."""

    def __init__(self, loader: Iterable, feed: DeviceInput):
        self.loader = loader
        self.feed = feed
        self.stream = device.new_stream(feed.device)
        self.wait = 0.0
        self.copy = 0.0  # CPU: seconds of the feed (it runs inline); accelerators: timing events, read lazily
        self.copy_events: tuple | None = None
        self.next_copy_events: tuple | None = None

    def copy_seconds(self) -> float:
        """Seconds the yielded batch's copy took; on an accelerator its side-stream time (overlapped with compute),
        which waits for the copy to finish: read it on sampled steps only."""
        if self.copy_events is None:
            return self.copy
        start, end = self.copy_events
        end.synchronize()
        return start.elapsed_time(end) / 1000

    def _fetch(self, it: Iterator) -> tuple[dict | None, float]:
        t0 = time.perf_counter()
        try:
            batch = next(it)
        except StopIteration:
            return None, time.perf_counter() - t0
        return batch, time.perf_counter() - t0

    def __iter__(self) -> Iterator[dict]:
        it = iter(self.loader)
        if self.stream is None:
            while True:
                batch, self.wait = self._fetch(it)
                if batch is None:
                    return
                t0 = time.perf_counter()
                fed = self.feed(batch)
                self.copy = time.perf_counter() - t0
                yield fed
        batch, wait = self._fetch(it)
        nxt = self._to_device(batch)
        while nxt is not None:
            compute = device.current_stream(self.feed.device)
            compute.wait_stream(self.stream)
            current = nxt
            for v in current.values():
                if torch.is_tensor(v) and v.device.type != "cpu":
                    v.record_stream(compute)
            self.wait = wait
            self.copy_events = self.next_copy_events
            batch, wait = self._fetch(it)  # overlaps with the compute of `current`
            nxt = self._to_device(batch)
            yield current

    def _to_device(self, batch: dict | None) -> dict | None:
        if batch is None:
            return None
        start = torch.Event(self.feed.device, enable_timing=True)
        end = torch.Event(self.feed.device, enable_timing=True)
        start.record(self.stream)
        with device.use_stream(self.stream):
            fed = self.feed(batch)
        end.record(self.stream)
        self.next_copy_events = (start, end)
        return fed
