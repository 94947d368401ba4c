"""The geometry of reading a big page in tiles: a tile with its overlap (``TileSpec``), where tiles start
along an axis, and which pixels of the stitched map each tile owns. A tile is a region of the page's own
pixels, read as the evaluation's resize reads an image that size (``scale``): tiles the size of a photo the
detector reads well read a page of such photos as it reads each. Torch-free: start-up validation checks a
``--tile`` before ``import torch``; ``runtime/tiles.py`` runs the model over them."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from textdet.errors import ConfigError

TILE_DIVISOR = 32  # DBNet's inputs are multiples of its output stride


@dataclass(frozen=True)
class TileSpec:
    """Tiles of ``height`` x ``width`` page pixels, neighbours overlapping by ``overlap``; the page is read at
    ``scale`` (the model's tiles are ``model_size``, multiples of 32)."""

    height: int
    width: int
    overlap: int
    scale: float = 1.0

    def __post_init__(self) -> None:
        for name, value in (("height", self.height), ("width", self.width)):
            if not isinstance(value, int) or value < TILE_DIVISOR:
                raise ConfigError(f"tile {name} {value}: must be a whole number of pixels, at least "
                                  f"{TILE_DIVISOR}")
        if not 0 <= self.overlap < min(self.height, self.width):
            raise ConfigError(f"tile overlap {self.overlap}: must be at least 0 and under the tile's shorter "
                              f"side ({min(self.height, self.width)})")

    def holds(self, height: int, width: int) -> bool:
        """Whether a page of ``height`` x ``width`` (its own pixels) fits in one tile (and is read
        untiled)."""
        return height <= self.height and width <= self.width

    def at_scale(self, scale: float) -> TileSpec:
        return replace(self, scale=scale)

    def model_size(self) -> tuple[int, int]:
        """A tile as the model reads it: its pixels at ``scale``, rounded up to a multiple of 32."""
        return round_up(self.height * self.scale), round_up(self.width * self.scale)

    def model_overlap(self) -> int:
        return round(self.overlap * self.scale)


def round_up(value: float, divisor: int = TILE_DIVISOR) -> int:
    return max(math.ceil(round(value, 6) / divisor) * divisor, divisor)


def default_overlap(height: int, width: int) -> int:
    """A fifth of the tile's shorter side, rounded down to a multiple of 32 (128 for 640 x 640 tiles)."""
    return max(min(height, width) // 5 // TILE_DIVISOR * TILE_DIVISOR, TILE_DIVISOR)


def parse_tile(text: str | list | tuple | None, overlap: int | None = None, where: str = "--tile"
               ) -> TileSpec | None:
    """``"736x1280"`` or ``[736, 1280]`` (height x width) -> a TileSpec (``overlap`` None:
    ``default_overlap``); None stays None."""
    if text is None:
        return None
    if isinstance(text, str):
        height, _, width = text.lower().partition("x")
        if not (height.strip().isdigit() and width.strip().isdigit()):
            raise ConfigError(f"{where} {text!r}: expected HEIGHTxWIDTH such as 736x1280")
        size = (int(height), int(width))
    elif isinstance(text, (list, tuple)) and len(text) == 2 and all(isinstance(v, int) for v in text):
        size = (text[0], text[1])
    else:
        raise ConfigError(f"{where}: expected [HEIGHT, WIDTH] such as [736, 1280], got {text!r}")
    if overlap is None:
        overlap = default_overlap(*size)
    try:
        return TileSpec(size[0], size[1], int(overlap))
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}") from None


def tile_starts(length: int, tile: int, overlap: int) -> list[int]:
    """Where tiles start along an axis of ``length`` pixels: every ``tile - overlap`` pixels, the last one
    moved back to end at the page's edge (so it overlaps its neighbour at least by ``overlap``)."""
    if length <= tile:
        return [0]
    step = tile - overlap
    count = math.ceil((length - tile) / step) + 1
    starts = [i * step for i in range(count - 1)]
    return [*starts, length - tile]


def owned_spans(starts: list[int], tile: int, length: int) -> list[tuple[int, int]]:
    """The pixels each tile gives the stitched map along one axis, ``[begin, end)``: two neighbours share
    their overlap down its middle, so every pixel comes from the tile it lies deepest inside."""
    spans = []
    for i, start in enumerate(starts):
        begin = 0 if i == 0 else (start + starts[i - 1] + tile) // 2
        end = length if i == len(starts) - 1 else (starts[i + 1] + start + tile) // 2
        spans.append((begin, end))
    return spans
