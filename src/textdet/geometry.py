"""Pure numpy/pyclipper helpers on polygons, float (P, 2) arrays of (x, y) with P >= 3, shared by every stage."""

from __future__ import annotations

import math

import numpy as np
import pyclipper


def next_vertices(a: np.ndarray) -> np.ndarray:
    """Each vertex's successor: ``np.roll(a, -1, axis=0)`` without its overhead (~6 us, 88 calls a training sample)."""
    return np.concatenate((a[1:], a[:1]))


def polygon_area(poly: np.ndarray) -> float:
    """Unsigned area of a simple polygon (shoelace formula)."""
    p = np.asarray(poly, dtype=np.float64).reshape(-1, 2)
    x, y = p[:, 0], p[:, 1]
    return float(abs(np.dot(x, next_vertices(y)) - np.dot(y, next_vertices(x))) / 2.0)


def polygon_areas(polys: np.ndarray) -> np.ndarray:
    """Unsigned areas (N,) of N same-length polygons (N, P, 2); may differ from ``polygon_area`` by an ulp."""
    p = np.asarray(polys, dtype=np.float64)
    x, y = p[..., 0], p[..., 1]
    return np.abs((x * next_vertices(y.T).T).sum(-1) - (y * next_vertices(x.T).T).sum(-1)) / 2.0


def polygon_perimeter(poly: np.ndarray) -> float:
    """Length of the closed outline of ``poly``."""
    p = np.asarray(poly, dtype=np.float64).reshape(-1, 2)
    return float(np.linalg.norm(p - next_vertices(p), axis=1).sum())


def shrink_distance(poly: np.ndarray, shrink_ratio: float) -> float:
    """DB's offset D = A * (1 - r^2) / L, used both to shrink (targets) and to pad (border map)."""
    return unclip_distance(poly, 1.0 - shrink_ratio**2)


def unclip_distance(poly: np.ndarray, expand_ratio: float) -> float:
    """Post-processing's offset D = A * ratio / L that undoes the training-time shrink."""
    perimeter = polygon_perimeter(poly)
    return 0.0 if perimeter <= 0 else polygon_area(poly) * expand_ratio / perimeter


def offset_polygon(poly: np.ndarray, distance: float) -> list[np.ndarray]:
    """Offset ``poly`` by ``distance`` pixels, round joins (positive grows); every result as float64 (P, 2), [] when
    a shrink makes it vanish. Coordinates are rounded first: pyclipper (and every DB) works on integers."""
    offsetter = pyclipper.PyclipperOffset()
    path = np.round(np.asarray(poly, dtype=np.float64).reshape(-1, 2)).astype(np.int64).tolist()
    offsetter.AddPath(path, pyclipper.JT_ROUND, pyclipper.ET_CLOSEDPOLYGON)
    result = offsetter.Execute(float(distance))
    return [np.asarray(r, dtype=np.float64).reshape(-1, 2) for r in result if len(r) >= 3]


def box_points(rects: np.ndarray) -> np.ndarray:
    """``cv2.boxPoints`` (its formula) in float64 for many rects: (N, 5) ``[cx, cy, w, h, angle]`` -> (N, 4, 2)."""
    cx, cy, w, h, angle = (rects[:, i] for i in range(5))
    rad = np.deg2rad(angle)
    b, a = np.cos(rad) * 0.5, np.sin(rad) * 0.5
    p0x, p0y = cx - a * h - b * w, cy + b * h - a * w
    p1x, p1y = cx + a * h - b * w, cy - b * h - a * w
    xs = np.stack([p0x, p1x, 2.0 * cx - p0x, 2.0 * cx - p1x], axis=1)
    ys = np.stack([p0y, p1y, 2.0 * cy - p0y, 2.0 * cy - p1y], axis=1)
    return np.stack([xs, ys], axis=2)


def order_quads(boxes: np.ndarray) -> np.ndarray:
    """The one corner order for quads: (N, 4, 2) -> TL, TR, BR, BL per box (leftmost two by y, then rightmost)."""
    rows = np.arange(len(boxes))[:, None]
    by_x = boxes[rows, np.argsort(boxes[..., 0], axis=1, kind="stable")]
    swap = (by_x[:, 0, 1] > by_x[:, 1, 1]).astype(np.intp), (by_x[:, 2, 1] > by_x[:, 3, 1]).astype(np.intp)
    pick = np.stack([swap[0], 2 + swap[1], 3 - swap[1], 1 - swap[0]], axis=1)  # TL, TR, BR, BL in by_x
    return by_x[rows, pick]


def quad_corners(cx: float, cy: float, w: float, h: float, angle: float) -> tuple[float, ...]:
    """One rectangle's corners TL, TR, BR, BL as 8 floats: ``box_points`` + ``order_quads`` in pure Python."""
    rad = math.radians(angle)
    b, a = math.cos(rad) * 0.5, math.sin(rad) * 0.5
    ah, bw, bh, aw = a * h, b * w, b * h, a * w
    xs = (cx - ah - bw, cx + ah - bw, cx + ah + bw, cx - ah + bw)
    ys = (cy + bh - aw, cy - bh - aw, cy - bh + aw, cy + bh + aw)
    l0, l1, r0, r1 = sorted(range(4), key=xs.__getitem__)  # stable
    if ys[l0] > ys[l1]:
        l0, l1 = l1, l0
    if ys[r0] > ys[r1]:
        r0, r1 = r1, r0
    return xs[l0], ys[l0], xs[r0], ys[r0], xs[r1], ys[r1], xs[l1], ys[l1]


def poly_bounds(polys: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per-polygon (N, 2) min and max corners (x, y) of non-empty polygons, computed with one reduceat each."""
    pts = np.concatenate([np.asarray(p, dtype=np.float64).reshape(-1, 2) for p in polys])
    starts = np.concatenate([[0], np.cumsum([len(p) for p in polys])[:-1]])
    return np.minimum.reduceat(pts, starts, axis=0), np.maximum.reduceat(pts, starts, axis=0)


def map_polys(polys: list[np.ndarray], matrix: np.ndarray) -> list[np.ndarray]:
    """Apply a (3, 3) or (2, 3) affine ``matrix`` to every (P_i, 2) polygon in one product -> float32 arrays."""
    if len(polys) == 0:
        return []
    ends = np.cumsum([len(p) for p in polys]).tolist()
    pts = np.concatenate([np.reshape(p, (-1, 2)) for p in polys], dtype=np.float64)
    out = (pts @ matrix[:2, :2].T + matrix[:2, 2]).astype(np.float32)
    return [out[a:b] for a, b in zip([0, *ends[:-1]], ends, strict=True)]  # views of one array (np.split: 3x slower)
