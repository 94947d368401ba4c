"""Pure numpy/pyclipper helpers on polygons, float (P, 2) arrays of (x, y) with P >= 3, shared by every stage."""

from __future__ import annotations

import numpy as np
import pyclipper


def next_vertices(a: np.ndarray) -> np.ndarray:
    """Each vertex's successor: ``np.roll(a, -1, axis=0)`` without its overhead (~6 us, 88 calls a training sample)."""
    return np.concatenate((a[1:], a[:1]))


def polygon_area(poly: np.ndarray) -> float:
    """Unsigned area of a simple polygon: ``polygon_areas`` of a batch of one, so the two agree exactly."""
    points = np.asarray(poly, dtype=np.float64).reshape(1, -1, 2)
    return float(polygon_areas(points)[0])


def polygon_areas(polys: np.ndarray) -> np.ndarray:
    """Unsigned areas (N,) of N same-length polygons (N, P, 2), shoelace formula.

    Each polygon's cross products are summed along one contiguous row, so a polygon's area is the same
    alone or in any batch (``polygon_area``).
    """
    points = np.asarray(polys, dtype=np.float64)
    successors = np.concatenate((points[..., 1:, :], points[..., :1, :]), axis=-2)
    cross = points[..., 0] * successors[..., 1] - points[..., 1] * successors[..., 0]
    return np.abs(np.add.reduce(cross, axis=-1)) / 2.0


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
    """``cv2.boxPoints`` for many rects, with its formula and corner order, in float64: (N, 5)
    ``[cx, cy, w, h, angle]`` -> (N, 4, 2)."""
    cx, cy, w, h, angle = rects.T
    radians = np.deg2rad(angle)
    half_cos = np.cos(radians) * 0.5  # OpenCV's b
    half_sin = np.sin(radians) * 0.5  # OpenCV's a
    x0 = cx - half_sin * h - half_cos * w
    y0 = cy + half_cos * h - half_sin * w
    x1 = cx + half_sin * h - half_cos * w
    y1 = cy - half_cos * h - half_sin * w
    xs = np.stack([x0, x1, 2.0 * cx - x0, 2.0 * cx - x1], axis=1)  # corners 2 and 3 mirror 0 and 1
    ys = np.stack([y0, y1, 2.0 * cy - y0, 2.0 * cy - y1], axis=1)
    return np.stack([xs, ys], axis=2)


def order_quads(boxes: np.ndarray) -> np.ndarray:
    """The one corner order for quads: (N, 4, 2) -> TL, TR, BR, BL per box.

    The two leftmost corners (stable sort by x) are TL above BL; the two rightmost are TR above BR.
    """
    rows = np.arange(len(boxes))[:, None]
    by_x = boxes[rows, np.argsort(boxes[..., 0], axis=1, kind="stable")]
    # by_x[:, 0:2] are the left corners, by_x[:, 2:4] the right ones; 1 where the second of a pair is higher
    left_swap = (by_x[:, 0, 1] > by_x[:, 1, 1]).astype(np.intp)
    right_swap = (by_x[:, 2, 1] > by_x[:, 3, 1]).astype(np.intp)
    top_left = left_swap
    bottom_left = 1 - left_swap
    top_right = 2 + right_swap
    bottom_right = 3 - right_swap
    pick = np.stack([top_left, top_right, bottom_right, bottom_left], axis=1)  # indices into by_x
    return by_x[rows, pick]


def quad_corners(rects: np.ndarray) -> np.ndarray:
    """The one routine from rectangles to quads: (N, 5) ``[cx, cy, w, h, angle]`` (``minAreaRect``'s values)
    -> float64 (N, 4, 2) corners TL, TR, BR, BL."""
    return order_quads(box_points(np.asarray(rects, dtype=np.float64).reshape(-1, 5)))


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
