"""Big pages read in tiles: a page larger than one tile is cut into overlapping tiles at its own pixels, the
model runs on the tiles (several at a time), and the probability maps are stitched back into one map of the
page, each pixel taken from the tile whose centre it is nearest (the overlap is split down its middle). The
stitched map is post-processed once, so a word cut by a tile edge comes out once, as one box. A page no
larger than one tile is not tiled at all: its output is exactly the untiled one."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from textdet.data.tiling import TileSpec, owned_spans, tile_starts


def run_tiled(run: Callable, image: np.ndarray | torch.Tensor, spec: TileSpec, batch_size: int = 4
              ) -> np.ndarray | torch.Tensor:
    """The probability map (1, H, W) of ``image`` (3, H, W) float32, the page resized to ``spec.scale`` (H and
    W multiples of 32), from ``run`` ((N, 3, h, w) -> (N, 1, h, w), numpy or torch as ``image`` is) over
    ``spec``'s model tiles, ``batch_size`` tiles at a time."""
    _, height, width = image.shape
    model_h, model_w = spec.model_size()
    tile_h, tile_w = min(model_h, height), min(model_w, width)
    rows = tile_starts(height, tile_h, spec.model_overlap())
    cols = tile_starts(width, tile_w, spec.model_overlap())
    row_spans = owned_spans(rows, tile_h, height)
    col_spans = owned_spans(cols, tile_w, width)
    tiles = [(top, left, row_span, col_span) for top, row_span in zip(rows, row_spans, strict=True)
             for left, col_span in zip(cols, col_spans, strict=True)]
    is_tensor = isinstance(image, torch.Tensor)
    stitched = image.new_zeros((1, height, width)) if is_tensor else np.zeros((1, height, width), np.float32)
    for first in range(0, len(tiles), batch_size):
        chunk = tiles[first : first + batch_size]
        crops = [image[:, top : top + tile_h, left : left + tile_w] for top, left, _, _ in chunk]
        batch = torch.stack(crops) if is_tensor else np.ascontiguousarray(np.stack(crops))
        probs = run(batch)
        for prob, (top, left, (row_begin, row_end), (col_begin, col_end)) in zip(probs, chunk, strict=True):
            owned = prob[0, row_begin - top : row_end - top, col_begin - left : col_end - left]
            stitched[0, row_begin:row_end, col_begin:col_end] = owned
    return stitched


def tiled_forward(model: Callable, images: torch.Tensor, page_sizes: list[tuple[int, int]], spec: TileSpec,
                  batch_size: int = 4) -> dict[str, torch.Tensor]:
    """``model(images)`` (``{"binary": (N, 1, H, W)}``), each page larger than ``spec`` at its own pixels
    (``page_sizes``: each page's (h, w) before any resize) read in tiles instead, the others as they are."""
    if all(spec.holds(height, width) for height, width in page_sizes):
        return model(images)

    def probabilities(batch: torch.Tensor) -> torch.Tensor:
        return model(batch)["binary"]

    maps = []
    for image, (height, width) in zip(images, page_sizes, strict=True):
        if spec.holds(height, width):
            maps.append(probabilities(image[None])[0])
        else:
            maps.append(run_tiled(probabilities, image, spec, batch_size))
    return {"binary": torch.stack(maps)}
