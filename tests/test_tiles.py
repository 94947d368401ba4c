"""Big pages read in tiles (data/tiling.py, runtime/tiles.py, Detector(tile=...)): where tiles start, which
pixels each tile gives the stitched map, a stitched map equal to the whole page's, one box for a word cut
by a tile edge, and a page that fits in one tile read exactly as without tiles.

The "model" of these tests reads the text off the pixels: its probability map is the image's first channel
(normalised to 0-1), the same function of a pixel wherever the tile around it starts, so the stitched map of
a page must equal the map of the whole page."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import RECIPE as RECIPE_PATH
from textdet.data.resize import DetResize, NormalizeImage
from textdet.data.tiling import TileSpec, owned_spans, parse_tile, tile_starts
from textdet.errors import ConfigError
from textdet.metrics import DetMetric
from textdet.postprocess import DBPostprocess
from textdet.predict import Detector, Preprocess
from textdet.runtime.tiles import run_tiled, tiled_forward

PIXELS_TO_ONE = NormalizeImage(mean=[0, 0, 0], std=[255, 255, 255])  # 0-255 pixels -> 0-1


def reads_pixels(images: np.ndarray) -> np.ndarray:
    """float32 (N, 3, H, W) in 0-1 -> the probability map (N, 1, H, W): the first channel."""
    return np.ascontiguousarray(images[:, :1])


def page_with_words(height: int, width: int, boxes: list[tuple[int, int, int, int]]) -> np.ndarray:
    """A black RGB page with white rectangles (x0, y0, x1, y1), end exclusive."""
    page = np.zeros((height, width, 3), np.uint8)
    for x0, y0, x1, y1 in boxes:
        page[y0:y1, x0:x1] = 255
    return page


def test_tile_starts_cover_the_page_and_end_at_its_edge():
    """1000 px in 640 px tiles overlapping by 128: a step of 512 would end at 1152, so the second tile moves
    back to 360 (1000 - 640). 1500 px: 0, 512, then 860 (1500 - 640). A page no longer than a tile: one."""
    assert tile_starts(1000, 640, 128) == [0, 360]
    assert tile_starts(1500, 640, 128) == [0, 512, 860]
    assert tile_starts(640, 640, 128) == [0]
    assert tile_starts(500, 640, 128) == [0]


def test_each_pixel_comes_from_one_tile_split_down_the_overlap():
    """Tiles at 0 and 360 (640 long) overlap on 360-640: the boundary is their middle, 500. Three tiles at 0,
    512 and 860 on 1500 px: boundaries at (512 + 640) // 2 = 576 and (860 + 1152) // 2 = 1006."""
    assert owned_spans([0, 360], 640, 1000) == [(0, 500), (500, 1000)]
    assert owned_spans([0, 512, 860], 640, 1500) == [(0, 576), (576, 1006), (1006, 1500)]
    assert owned_spans([0], 640, 640) == [(0, 640)]


def test_tile_sizes_are_checked_naming_the_option():
    assert parse_tile("720x1280", 128) == TileSpec(720, 1280, 128)
    assert parse_tile([64, 96], 0) == TileSpec(64, 96, 0)
    assert parse_tile("720x1280") == TileSpec(720, 1280, 128)  # a fifth of 720 (144), down to a multiple of 32
    assert parse_tile(None) is None
    with pytest.raises(ConfigError, match="--tile: tile height 16: must be a whole number of pixels, at least 32"):
        parse_tile("16x1280")
    with pytest.raises(ConfigError, match="eval.tile: .*overlap 640"):
        parse_tile([640, 640], 640, "eval.tile")
    with pytest.raises(ConfigError, match="HEIGHTxWIDTH"):
        parse_tile("big")


def test_a_page_larger_than_a_tile_is_read_at_a_tiles_scale():
    """PaddleOCR's inference resize (longer side at most 960) with 720 x 1280 tiles: a tile-sized photo is read
    at 960 / 1280 = 0.75, so a page of 3 x 3 such photos (2160 x 3840) is read at 0.75 too, 1620 x 2880 rounded
    up to 32: 1632 x 2880, where without tiles it is shrunk to 960 px, a quarter (544 x 960). A page that fits
    in one tile is resized as without tiles. With a shorter side of 864 a tile is read at 864 / 720 = 1.2: the
    model's tiles are then 864 x 1536."""
    untiled = DetResize(limit_type="max", limit_side_len=960)
    resize = DetResize(limit_type="max", limit_side_len=960, tile=(720, 1280))
    assert resize.tile_scale() == pytest.approx(0.75)
    assert resize.output_size(2160, 3840) == (1632, 2880, False)
    assert untiled.output_size(2160, 3840) == (544, 960, False)
    assert resize.output_size(600, 800) == untiled.output_size(600, 800)
    assert DetResize(limit_type="min", limit_side_len=864, tile=(720, 1280)).tile_scale() == pytest.approx(1.2)
    assert TileSpec(720, 1280, 160, scale=1.2).model_size() == (864, 1536)
    assert TileSpec(720, 1280, 160, scale=1.2).model_overlap() == 192


@pytest.mark.parametrize("spec", [TileSpec(64, 64, 0), TileSpec(64, 96, 32), TileSpec(96, 64, 16)])
def test_the_stitched_map_is_the_whole_pages_map(spec):
    rng = np.random.default_rng(0)
    image = rng.random((3, 160, 224), dtype=np.float32)
    stitched = run_tiled(reads_pixels, image, spec, batch_size=3)
    assert np.array_equal(stitched, image[:1])
    as_tensor = run_tiled(lambda batch: batch[:, :1], torch.from_numpy(image), spec, batch_size=2)
    assert torch.equal(as_tensor, torch.from_numpy(image[:1]))


def test_tiled_forward_reads_only_the_pages_larger_than_a_tile():
    """A batch of two pages padded to 160 x 224: the page that is 160 x 224 is read in tiles (seen as 64 x 64
    inputs), the 64 x 64 one whole, as the batch holds it (its padding is masked after); both maps equal the
    model's map of the whole input."""
    seen = []

    def model(batch: torch.Tensor) -> dict[str, torch.Tensor]:
        seen.append(tuple(batch.shape[-2:]))
        return {"binary": batch[:, :1] * 1.0}

    images = torch.rand(2, 3, 160, 224)
    out = tiled_forward(model, images, [(160, 224), (64, 64)], TileSpec(64, 64, 16))
    assert torch.equal(out["binary"], images[:, :1])
    assert seen.count((160, 224)) == 1 and seen.count((64, 64)) > 2
    seen.clear()
    tiled_forward(model, images, [(64, 64), (60, 60)], TileSpec(64, 64, 16))
    assert seen == [(160, 224)]  # every page fits in a tile: the batch runs as it is


def detector(tile: TileSpec | None) -> Detector:
    # max side 128: a 64 x 128 tile is read at scale 1, and the smaller page of the last test is shrunk
    preprocess = Preprocess(resize=DetResize(limit_type="max", limit_side_len=128), normalize=PIXELS_TO_ONE)
    post = DBPostprocess(binary_thresh=0.5, box_thresh=0.5, expand_ratio=0.1)  # boxes close to the words
    return Detector(reads_pixels, preprocess, post, batch_size=2, tile=tile)


def test_a_word_across_a_tile_edge_comes_out_once():
    """A 192 x 320 page, tiles of 64 x 128 overlapping by 32: tile columns start at 0, 96 and 192, so the
    word at x 80-180, y 70-100 crosses two tile boundaries (x 112 and 208 in the stitched map) and a row
    boundary (y 96). Read in tiles it is one box, the box of the whole page's map, and the ICDAR metric
    scores it 1.0 (a second box on the same word would halve the precision)."""
    page = page_with_words(192, 320, [(80, 70, 180, 100)])
    tiled = detector(TileSpec(64, 128, 32))([page][0])
    whole = DBPostprocess(binary_thresh=0.5, box_thresh=0.5, expand_ratio=0.1)(
        page[None, None, :, :, 0].astype(np.float32) / 255, np.array([[192, 320, 1, 1]], np.float32))[0]
    assert len(tiled["polys"]) == 1
    assert np.array_equal(tiled["polys"][0], whole["polys"][0])
    word = np.array([[80, 70], [180, 70], [180, 100], [80, 100]], np.float64)
    metric = DetMetric()
    metric.update([tiled["polys"]], [[word]], [np.array([False])])
    assert metric.compute()["f-score"] == pytest.approx(1.0)


def test_a_page_that_fits_in_one_tile_is_read_exactly_as_without_tiles():
    """A 90 x 120 page with tiles of 128 x 128: resized (max side 128) and read whole, the same boxes and
    scores to the last bit as a Detector without tiles; the larger page beside it is tiled."""
    small = page_with_words(90, 120, [(10, 20, 60, 40), (70, 50, 110, 70)])
    big = page_with_words(200, 300, [(20, 30, 250, 60)])
    with_tiles = detector(TileSpec(128, 128, 32))([small, big])
    without = detector(None)([small])
    assert len(with_tiles[0]["polys"]) == 2
    for ours, theirs in zip(with_tiles[0]["polys"], without[0]["polys"], strict=True):
        assert np.array_equal(ours, theirs)
    assert with_tiles[0]["scores"] == without[0]["scores"]
    assert len(with_tiles[1]["polys"]) == 1


def test_eval_with_tiles_larger_than_every_page_scores_as_without(synth_root, tmp_path, capsys):
    """The tiny set's 96 x 128 pages fit in 96 x 128 tiles: `textdet eval --tile` gives the untiled figures to
    the last digit. With 64 x 64 tiles every page is read in tiles, as the config key eval.tile does."""
    import json

    from conftest import save_tiny_model
    from textdet.cli import main

    opts, _, _, ckpt = save_tiny_model(synth_root, str(tmp_path))
    args = ["eval", "-c", str(RECIPE_PATH), *sum((["-o", o] for o in opts), []), "--ckpt", ckpt, "--json",
            "--no-progress"]

    def scores(*extra: str) -> dict:
        assert main([*args, *extra]) == 0
        result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        return {key: result[key] for key in ("recall", "precision", "f-score")}

    assert scores("--tile", "96x128") == scores()
    tiled = scores("--tile", "64x64", "--overlap", "16")
    assert scores("-o", "eval.tile=[64,64]", "-o", "eval.tile_overlap=16") == tiled
