"""Pure numpy/pyclipper polygon helpers shared by targets, post-processing and metrics.

A polygon is a float array of shape (P, 2) holding (x, y) vertices, P >= 3. Nothing here
knows about images, tensors or configs, so every function is easy to test by hand.
"""

from __future__ import annotations

import numpy as np
import pyclipper


def polygon_area(poly: np.ndarray) -> float:
    """Unsigned area of a simple polygon (shoelace formula)."""
    p = np.asarray(poly, dtype=np.float64).reshape(-1, 2)
    x, y = p[:, 0], p[:, 1]
    return float(abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) / 2.0)


def polygon_perimeter(poly: np.ndarray) -> float:
    """Length of the closed outline of ``poly``."""
    p = np.asarray(poly, dtype=np.float64).reshape(-1, 2)
    return float(np.linalg.norm(p - np.roll(p, -1, axis=0), axis=1).sum())


def shrink_distance(poly: np.ndarray, shrink_ratio: float) -> float:
    """DB's offset D = A * (1 - r^2) / L, used both to shrink (targets) and to pad (border map)."""
    perimeter = polygon_perimeter(poly)
    if perimeter <= 0:
        return 0.0
    return polygon_area(poly) * (1.0 - shrink_ratio**2) / perimeter


def unclip_distance(poly: np.ndarray, expand_ratio: float) -> float:
    """Post-processing's offset D = A * ratio / L that undoes the training-time shrink."""
    perimeter = polygon_perimeter(poly)
    if perimeter <= 0:
        return 0.0
    return polygon_area(poly) * expand_ratio / perimeter


def offset_polygon(poly: np.ndarray, distance: float) -> list[np.ndarray]:
    """Offset ``poly`` by ``distance`` pixels with round joins (positive grows, negative shrinks).

    Returns every resulting polygon as a float64 (P, 2) array; an empty list when a shrink
    makes the polygon vanish. Coordinates are rounded to integers first, as pyclipper (and
    every DB implementation) works on the integer lattice.
    """
    offsetter = pyclipper.PyclipperOffset()
    path = np.round(np.asarray(poly, dtype=np.float64).reshape(-1, 2)).astype(np.int64).tolist()
    offsetter.AddPath(path, pyclipper.JT_ROUND, pyclipper.ET_CLOSEDPOLYGON)
    result = offsetter.Execute(float(distance))
    return [np.asarray(r, dtype=np.float64).reshape(-1, 2) for r in result if len(r) >= 3]


def order_points_clockwise(pts: np.ndarray) -> np.ndarray:
    """Order 4 points as top-left, top-right, bottom-right, bottom-left (image coordinates)."""
    pts = np.asarray(pts, dtype=np.float32).reshape(4, 2)
    by_x = pts[np.argsort(pts[:, 0], kind="stable")]
    left, right = by_x[:2], by_x[2:]
    tl, bl = left[np.argsort(left[:, 1], kind="stable")]
    tr, br = right[np.argsort(right[:, 1], kind="stable")]
    return np.stack([tl, tr, br, bl]).astype(np.float32)


def is_valid_polygon(poly: np.ndarray) -> bool:
    """True for a finite polygon with at least 3 vertices and a non-zero area."""
    p = np.asarray(poly)
    return p.ndim == 2 and p.shape[0] >= 3 and p.shape[1] == 2 and bool(np.isfinite(p).all()) and (
        polygon_area(p) > 0
    )


def map_polys(polys: list[np.ndarray], matrix: np.ndarray) -> list[np.ndarray]:
    """Apply a 3x3 (or 2x3) affine ``matrix`` to every polygon in one vectorised product.

    Args:
        polys: list of (P_i, 2) arrays (x, y).
        matrix: (3, 3) or (2, 3) affine matrix on column vectors (x, y, 1).

    Returns:
        list of (P_i, 2) float32 arrays.
    """
    if len(polys) == 0:
        return []
    lengths = [len(p) for p in polys]
    pts = np.concatenate([np.asarray(p, dtype=np.float64).reshape(-1, 2) for p in polys])
    out = pts @ matrix[:2, :2].T + matrix[:2, 2]
    return [a.astype(np.float32) for a in np.split(out, np.cumsum(lengths)[:-1])]
