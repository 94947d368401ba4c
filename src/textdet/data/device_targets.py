"""DB targets built per batch on the training device (``train.targets_on_device``): workers only decode and warp,
the four maps come from one distance field per pixel batch (how:
docs/decisions/where-targets-are-made.md)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from textdet.config.components import component_repr
from textdet.data.pipeline import Compose
from textdet.data.targets import BorderMap, ShrinkBinaryMap, polys_and_tags, shrink_polygon
from textdet.device import is_accelerator
from textdet.errors import ConfigError, SampleError
from textdet.geometry import shrink_distance

__all__ = ["COLUMNS", "DeviceTargets", "PackPolygons", "device_columns", "split_device_targets", "wants_device_targets"]

COLUMNS = ("target_polys", "target_kinds", "target_dists")  # what workers ship instead of the four maps
OUTLINE, PIECE, IGNORED = 1, 2, 3  # target_kinds
MAP_COLUMNS = ("binary_map", "mask", "thresh_map", "thresh_mask")
# Pixel-vertex pairs per chunk: bounds the (pixels, vertices) temporaries (~32 MB each in float32).
_CHUNK = 1 << 23
# cv2.fillPoly also fills the pixels an outline passes through: grow the outline by half a pixel (diagonal) to match.
_EDGE = 0.5 * math.sqrt(2.0)


def wants_device_targets(value: Any, device: torch.device) -> bool:
    """``train.targets_on_device``: auto (on for cuda/npu/xpu, off on the CPU and MPS), true or false."""
    if value == "auto":
        return is_accelerator(device) and device.type != "mps"  # cuda, npu, xpu (MPS: untested)
    if isinstance(value, bool):
        return value
    raise ConfigError(f"train.targets_on_device must be auto, true or false, got {value!r}")


def device_columns(columns: list[str]) -> list[str]:
    """Output columns with the four map columns replaced (at the first one's place) by the polygon arrays."""
    if not any(c in MAP_COLUMNS for c in columns):
        return list(columns)
    first = min(columns.index(c) for c in MAP_COLUMNS if c in columns)
    rest = [c for c in columns if c not in MAP_COLUMNS]
    return rest[:first] + list(COLUMNS) + rest[first:]


class PackPolygons:
    """Worker half of the device targets: ShrinkBinaryMap's and BorderMap's per-polygon rules and pyclipper
    shrinks, no pixels. ``shrink``/``border``: the config's ShrinkBinaryMap and BorderMap (their parameters apply).

    Writes fixed-size arrays (so the default collate stacks them): ``target_polys`` (max_polys, max_points, 2)
    float32, each padded with copies of its first vertex; ``target_kinds`` (max_polys,) uint8: OUTLINE (a text
    polygon: threshold map and mask), PIECE (a piece of its shrink: probability map), IGNORED (rounded, masked out),
    0 (unused slot); ``target_dists`` (max_polys,) float32, the border D of an OUTLINE. Also the new ``ignore_tags``.
    """

    def __init__(self, shrink: Any, border: Any, max_polys: int = 256, max_points: int = 32) -> None:
        self.shrink = shrink
        self.border = border
        self.max_polys = max_polys
        self.max_points = max_points

    __repr__ = component_repr

    def __call__(self, sample: dict[str, Any], rng: np.random.Generator | None = None) -> dict[str, Any]:
        polys, tags = polys_and_tags(sample)
        out = np.zeros((self.max_polys, self.max_points, 2), dtype=np.float32)
        kinds = np.zeros(self.max_polys, dtype=np.uint8)
        dists = np.zeros(self.max_polys, dtype=np.float32)
        items: list[tuple[np.ndarray, int, float]] = []
        for i, raw in enumerate(polys):
            poly, _, shrunk = shrink_polygon(raw, tags[i], self.shrink.min_text_size, self.shrink.shrink_ratio)
            tags[i] = tags[i] or not shrunk
            if poly is None:
                continue
            if not shrunk:
                items.append((np.round(poly), IGNORED, 0.0))  # cv2.fillPoly of the rounded polygon, as on the CPU
                continue
            items.append((poly, OUTLINE, shrink_distance(poly, self.border.shrink_ratio)))
            items += [(piece, PIECE, 0.0) for piece in shrunk]
        if len(items) > self.max_polys or any(len(p) > self.max_points for p, _, _ in items):
            raise SampleError(f"more than {self.max_polys} polygons (with shrinks) or {self.max_points} vertices per "
                              "polygon: too many for the device targets; set train.targets_on_device: false")
        for n, (poly, kind, distance) in enumerate(items):
            out[n, : len(poly)], out[n, len(poly) :] = poly, poly[0]
            kinds[n], dists[n] = kind, distance
        sample["target_polys"], sample["target_kinds"], sample["target_dists"] = out, kinds, dists
        sample["ignore_tags"] = tags
        return sample


def _crops(polys: np.ndarray, kinds: np.ndarray, dists: np.ndarray, h: int, w: int) -> tuple[np.ndarray, ...]:
    """Host-side plan (numpy, no device sync): the used polygons and each one's pixel box, clipped to the image.

    Returns verts (M, P, 2), kinds, dists, batch index, box origin x0, y0 and size bw, bh (each (M,)); P is
    trimmed to the most vertices any polygon of the batch uses.
    """
    b, k = np.nonzero(kinds)
    verts, kinds, dists = polys[b, k], kinds[b, k], dists[b, k]
    used = (verts != verts[:, :1]).any(axis=(0, 2))
    verts = verts[:, : max(int(np.flatnonzero(used).max(initial=1)) + 1, 2)]
    margin = np.where(kinds == OUTLINE, dists, 0.0) + 1.0
    lo = np.floor(verts.min(axis=1) - margin[:, None]).clip(0, None)
    hi = np.ceil(verts.max(axis=1) + margin[:, None]).clip(None, (w - 1, h - 1))
    keep = (lo <= hi).all(axis=1)
    lo, size = lo[keep].astype(np.int64), (hi - lo + 1)[keep].astype(np.int64)
    return verts[keep], kinds[keep], dists[keep], b[keep].astype(np.int64), lo[:, 0], lo[:, 1], size[:, 0], size[:, 1]


def _pixel_values(px: torch.Tensor, py: torch.Tensor, a: torch.Tensor, kind: torch.Tensor,
                  dist_d: torch.Tensor) -> torch.Tensor:
    """(K, 4) float32 [binary, ignored, thresh value, thresh mask] of K pixels (px, py) (float32 (K,)), each against
    its polygon's vertices ``a`` (K, P, 2), kind (K,) and border D (K,).

    Fills follow cv2.fillPoly: pixel centres inside (even-odd rule) plus the outline's 8-connected line pixels (those
    within half a pixel of an edge along its minor axis). The threshold map is 1 - min(dist / D, 1); its mask, the
    outline offset by D, is the inside plus pixels within D of an edge (grown by the same half-pixel line rule).
    """
    e = torch.roll(a, -1, dims=1) - a  # edges a_i -> a_{i+1}; padding repeats vertex 0, so extra edges are points
    ex, ey = e[..., 0], e[..., 1]
    rx, ry = px[:, None] - a[..., 0], py[:, None] - a[..., 1]
    t = ((rx * ex + ry * ey) / (ex * ex + ey * ey).clamp_min(1e-12)).clamp(0.0, 1.0)
    edge_dist = ((rx - t * ex).square() + (ry - t * ey).square()).sqrt()
    dist = edge_dist.amin(1)
    # OpenCV's 8-connected line, walked from the left end: at each step along the major axis, the pixel nearest
    # the line on the minor axis; a tie (exactly 1/2 off) rounds towards the left end's minor coordinate.
    xmajor = ex.abs() >= ey.abs()
    along, span = torch.where(xmajor, rx, ry), torch.where(xmajor, ex, ey)
    exact = torch.where(xmajor, rx * ey / torch.where(ex == 0, 1.0, ex), ry * ex / torch.where(ey == 0, 1.0, ey))
    across = torch.where(xmajor, ry, rx) - exact  # off the line on the minor axis
    from_left = exact - torch.where(ex < 0, torch.where(xmajor, ey, ex), 0.0)  # minor offset from the left end
    near = (across.abs() < 0.5) | ((across.abs() == 0.5) & (across * from_left < 0))
    on_line = ((along * span.sign() >= 0) & (along.abs() <= span.abs()) & near).any(1)
    # Even-odd rule: count the edges crossing the ray from the pixel towards +x.
    spans = (a[..., 1] > py[:, None]) != (a[..., 1] + ey > py[:, None])
    x_cross = a[..., 0] + (py[:, None] - a[..., 1]) * ex / torch.where(spans, ey, 1.0)
    inside = ((spans & (px[:, None] < x_cross)).sum(1) % 2) == 1
    filled = inside | on_line
    outline = kind == OUTLINE
    # pyclipper pads the rounded polygon: measure the mask's distance from it (the map keeps the exact one).
    ar = a.round()
    er = torch.roll(ar, -1, dims=1) - ar
    qx, qy = px[:, None] - ar[..., 0], py[:, None] - ar[..., 1]
    length2 = (er * er).sum(-1)
    t = ((qx * er[..., 0] + qy * er[..., 1]) / length2.clamp_min(1e-12)).clamp(0.0, 1.0)
    rdist = ((qx - t * er[..., 0]).square() + (qy - t * er[..., 1]).square()).sqrt()
    half = torch.where(length2 > 0, 0.5 * er.abs().amax(-1) / length2.sqrt().clamp_min(1e-12), 0.5)
    thresh = torch.where(outline, (1.0 - dist / dist_d.clamp_min(1e-6)).clamp_min(0.0), 0.0)
    tmask = outline & (inside | ((rdist - half).amin(1) <= dist_d))
    return torch.stack([(filled & (kind == PIECE)).float(), (filled & (kind == IGNORED)).float(), thresh,
                        tmask.float()], 1)


class DeviceTargets:
    """Device half: ``PackPolygons`` arrays of a batch -> the four DB maps on ``device``, as targets.py draws them.

    Returns ``binary_map`` (B, 1, H, W), ``mask``, ``thresh_map``, ``thresh_mask`` (B, H, W), all float32 (the loss
    casts to fp32 anyway). ``chunk``: pixel-vertex pairs per batched pass (memory bound).
    """

    columns = COLUMNS  # the batch keys it consumes

    def __init__(self, thresh_min: float = 0.3, thresh_max: float = 0.7, chunk: int = _CHUNK) -> None:
        self.thresh_min = float(thresh_min)
        self.thresh_max = float(thresh_max)
        self.chunk = int(chunk)

    __repr__ = component_repr

    def __call__(self, batch: dict[str, Any], hw: tuple[int, int], device: torch.device) -> dict[str, torch.Tensor]:
        """``batch``: the collated CPU tensors of COLUMNS ((B, N, P, 2), (B, N), (B, N)); hw: the canvas (H, W)."""
        polys, kinds, dists = (batch[c].numpy() for c in COLUMNS)
        h, w, bsz = int(hw[0]), int(hw[1]), polys.shape[0]
        verts, kinds, dists, bidx, x0, y0, bw, bh = _crops(polys, kinds, dists, h, w)
        canvas = torch.zeros(4, bsz * h * w, dtype=torch.float32, device=device)
        counts = bw * bh
        total = int(counts.sum())
        if total:
            ends = np.cumsum(counts)
            meta = torch.from_numpy(np.stack([bidx, x0, y0, bw, ends - counts, ends])).to(device, non_blocking=True)
            verts_d = torch.from_numpy(verts).to(device, non_blocking=True)
            kd = torch.from_numpy(np.stack([kinds.astype(np.float32), dists], 1)).to(device, non_blocking=True)
            bidx_d, x0_d, y0_d, bw_d, starts_d, ends_d = meta
            step = max(self.chunk // verts.shape[1], 1)
            for start in range(0, total, step):  # chunks of pixels; a polygon may span two
                r = torch.arange(start, min(start + step, total), device=device)
                p = torch.searchsorted(ends_d, r, right=True)
                local = r - starts_d[p]
                py, px = y0_d[p] + local // bw_d[p], x0_d[p] + local % bw_d[p]
                values = _pixel_values(px.float(), py.float(), verts_d[p], kd[p, 0], kd[p, 1])
                flat = (bidx_d[p] * h + py) * w + px
                canvas.scatter_reduce_(1, flat.expand(4, -1), values.T, reduce="amax")
        binary, gone, value, tmask = canvas.view(4, bsz, h, w)
        scale = self.thresh_max - self.thresh_min
        return {"binary_map": binary[:, None], "mask": 1.0 - gone, "thresh_map": value * scale + self.thresh_min,
                "thresh_mask": tmask}


def split_device_targets(pipeline: Compose, option: Any, device: torch.device) -> tuple[Compose, DeviceTargets | None]:
    """``train.targets_on_device``: ShrinkBinaryMap + BorderMap become PackPolygons (workers) and the returned
    DeviceTargets (run on each batch by the trainer's feed). Unchanged, with None, when the option is off."""
    if not wants_device_targets(option, device):
        return pipeline, None
    transforms = list(pipeline.transforms)
    shrink = [i for i, t in enumerate(transforms) if isinstance(t, ShrinkBinaryMap)]
    border = [i for i, t in enumerate(transforms) if isinstance(t, BorderMap)]
    if len(shrink) != 1 or len(border) != 1 or border[0] < shrink[0]:
        if option is True:
            raise ConfigError("train.targets_on_device: true needs one ShrinkBinaryMap followed by one BorderMap in "
                              f"train.dataset.transform_pipeline (found {len(shrink)} and {len(border)}); set it to "
                              "auto or false")
        return pipeline, None
    shrink_map = transforms[shrink[0]]
    border_map = transforms[border[0]]
    transforms[shrink[0]] = PackPolygons(shrink_map, border_map)
    del transforms[border[0]]
    return Compose(transforms), DeviceTargets(border_map.thresh_min, border_map.thresh_max)
