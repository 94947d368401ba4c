"""Synthetic ICDAR2015-layout text-detection data, so that everything runs with no download: word-level clockwise
quads, never overlapping, tiny and faded words ``###``; same seed, same bytes (how and why:
docs/decisions/synthetic-data.md)."""

from __future__ import annotations

import functools
import os
import string
import sys

import cv2
import numpy as np
from PIL import Image, ImageDraw, ImageFont
from tqdm import tqdm

from textdet.data.labels import format_label_line

JPEG_QUALITY = 92
_WORDS = (
    "the of and to in is for on with at by from open close exit entry push pull stop slow park "
    "sale shop store cafe bar hotel bank taxi bus train station street road avenue city center "
    "north south east west left right welcome hello world coffee tea pizza food fresh market "
    "free wifi new old best price only today daily menu lunch dinner police fire school hospital "
    "pharmacy bakery books music art gallery museum garden office floor level gate door way "
    "lift stairs toilet info service help call now here there warning danger caution do not "
    "enter smoking area zone limit speed km hour day night time sign text detect model label "
    "Street Main Park Avenue Central Station Plaza Tower Bridge River Lake Hill Green Blue Red"
).split()
_HERSHEY = (cv2.FONT_HERSHEY_SIMPLEX, cv2.FONT_HERSHEY_DUPLEX, cv2.FONT_HERSHEY_COMPLEX, cv2.FONT_HERSHEY_TRIPLEX)
_LUMA = np.array([0.114, 0.587, 0.299])  # BGR weights
_LOWER = string.ascii_lowercase
_ALNUM = string.ascii_letters + string.digits


@functools.lru_cache(maxsize=256)
def _font(size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.load_default(size=size)


def _choice(rng: np.random.Generator, seq: str | tuple | list) -> str:
    return seq[int(rng.integers(len(seq)))]


def _random_word(rng: np.random.Generator) -> str:
    """A word, a random letter string, a number or an alphanumeric code."""
    kind = rng.random()
    if kind < 0.5:
        w = _choice(rng, _WORDS)
        case = rng.random()
        if case < 0.3:
            return w.upper()
        if case < 0.55:
            return w.capitalize()
        return w
    if kind < 0.75:
        w = "".join(_choice(rng, _LOWER) for _ in range(int(rng.integers(2, 9))))
        return w.upper() if rng.random() < 0.35 else w
    if kind < 0.9:
        n = str(int(rng.integers(0, 10 ** int(rng.integers(1, 6)))))
        deco = rng.random()
        if deco < 0.2:
            return f"${n}.{int(rng.integers(100)):02d}"
        if deco < 0.3:
            return f"{n}%"
        return n
    return "".join(_choice(rng, _ALNUM) for _ in range(int(rng.integers(3, 8))))


def _background(rng: np.random.Generator, w: int, h: int, heldout: bool = False) -> np.ndarray:
    """Smooth colour field plus grain, uint8 HxWx3; held-out images get multi-scale colour texture instead."""
    if heldout:
        layers = [cv2.resize(rng.integers(0, 256, (k, k, 3), dtype=np.uint8), (w, h), interpolation=cv2.INTER_CUBIC)
                  for k in (3, 9, 27)]
        bg = cv2.addWeighted(cv2.addWeighted(layers[0], 0.5, layers[1], 0.3, 0), 1.0, layers[2], 0.2, 0)
    elif rng.random() < 0.6:  # linear-ish gradient between corner colours
        small = rng.integers(0, 256, (2, 2, 3), dtype=np.uint8)
        bg = cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)
    else:  # colour blotches
        gh, gw = int(rng.integers(2, 6)), int(rng.integers(2, 7))
        small = rng.integers(0, 256, (gh, gw, 3), dtype=np.uint8)
        bg = cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)
    sigma = rng.uniform(0, 9)
    if sigma > 1:
        # Half-resolution luminance grain: a full-size normal draw costs ~50 ms at 1280x720.
        grain = rng.standard_normal(((h + 1) // 2, (w + 1) // 2), dtype=np.float32) * sigma + 128
        grain = cv2.resize(np.clip(grain, 0, 255).astype(np.uint8), (w, h), interpolation=cv2.INTER_LINEAR)
        bg = cv2.addWeighted(bg, 1.0, cv2.cvtColor(grain, cv2.COLOR_GRAY2BGR), 1.0, -128.0)
    return bg


def _draw_clutter(rng: np.random.Generator, img: np.ndarray, count: int) -> None:
    """Non-text shapes the detector must learn to ignore (drawn in place, before the text)."""
    h, w = img.shape[:2]
    base = min(h, w)
    for _ in range(count):
        kind, colour = rng.random(), tuple(int(c) for c in rng.integers(0, 256, 3))
        thick = int(rng.integers(1, max(2, base // 60)))
        p = (int(rng.integers(w)), int(rng.integers(h)))
        r = int(rng.integers(base // 40 + 2, base // 5 + 3))
        if kind < 0.25:
            q = (int(rng.integers(w)), int(rng.integers(h)))
            cv2.line(img, p, q, colour, thick, cv2.LINE_AA)
        elif kind < 0.45:
            q = (p[0] + int(rng.integers(-r, r + 1)) * 2, p[1] + int(rng.integers(-r, r + 1)))
            cv2.rectangle(img, p, q, colour, -1 if rng.random() < 0.5 else thick, cv2.LINE_AA)
        elif kind < 0.6:
            cv2.circle(img, p, r, colour, -1 if rng.random() < 0.5 else thick, cv2.LINE_AA)
        elif kind < 0.72:
            axes = (r, int(r * rng.uniform(0.2, 1.0)))
            cv2.ellipse(img, p, axes, float(rng.uniform(0, 180)), 0, 360, colour, -1, cv2.LINE_AA)
        elif kind < 0.88:  # star-convex blob
            n = int(rng.integers(5, 12))
            ang = np.sort(rng.uniform(0, 2 * np.pi, n))
            rad = r * rng.uniform(0.4, 1.0, n)
            pts = np.stack([p[0] + rad * np.cos(ang), p[1] + rad * np.sin(ang)], 1).round().astype(np.int32)
            cv2.fillPoly(img, [pts], colour, cv2.LINE_AA)
        else:  # parallel stripes (fences, barcodes): text-like texture without text
            n, step = int(rng.integers(4, 12)), int(rng.integers(3, 10))
            length, vertical = int(rng.integers(base // 20 + 3, base // 6 + 4)), rng.random() < 0.5
            for i in range(n):
                a = (p[0] + i * step, p[1]) if vertical else (p[0], p[1] + i * step)
                b = (a[0], a[1] + length) if vertical else (a[0] + length, a[1])
                cv2.line(img, a, b, colour, max(1, step // 3), cv2.LINE_AA)


def _render(words: list[str], size: int, stroke: int, face: int | None = None) -> tuple[np.ndarray, tuple, list]:
    """Render words on one line into an alpha patch: Pillow's font, or OpenCV's Hershey ``face``.
    Returns uint8 (h, w) ``alpha``, the patch spot of the text ``origin``, and ``(word, (x0, y0, x1, y1))`` ink boxes.
    """
    line = " ".join(words)
    if face is None:
        font = _font(size)
        left, top, right, bottom = font.getbbox(line, stroke_width=stroke)
        pad = 2 + stroke
        origin = (pad - left, pad - top)
        canvas = Image.new("L", (right - left + 2 * pad, bottom - top + 2 * pad), 0)
        ImageDraw.Draw(canvas).text(origin, line, font=font, fill=255, stroke_width=stroke, stroke_fill=255)
        alpha = np.asarray(canvas)
        length = font.getlength
    else:
        scale = cv2.getFontScaleFromHeight(face, int(0.72 * size))
        thick = max(1, size // 14) + stroke
        (tw, th), base = cv2.getTextSize(line, face, scale, thick)
        pad = 2 + thick
        origin = (pad, pad + th)
        alpha = np.zeros((th + base + 2 * pad, tw + 2 * pad), np.uint8)
        cv2.putText(alpha, line, origin, face, scale, 255, thick, cv2.LINE_AA)

        def length(text: str) -> int:
            """Width of ``text`` in pixels as cv2.putText draws it."""
            return cv2.getTextSize(text, face, scale, thick)[0][0]

    # Columns between words are split at the middle of each space.
    space = length(" ")
    cuts = [0, *(int(round(origin[0] + length(" ".join(words[:i])) + space / 2)) for i in range(1, len(words))),
            alpha.shape[1]]
    boxes = []
    for i, word in enumerate(words):
        c0 = cuts[i]
        ink = alpha[:, c0 : cuts[i + 1]] > 64
        rows, cols = np.flatnonzero(ink.any(1)), np.flatnonzero(ink.any(0))
        if rows.size:
            boxes.append((word, (c0 + int(cols[0]), int(rows[0]), c0 + int(cols[-1]) + 1, int(rows[-1]) + 1)))
    return alpha, origin, boxes


def _transform(rng: np.random.Generator, pw: int, ph: int, centre: tuple[float, float]) -> np.ndarray:
    """3x3 perspective matrix: patch (pw x ph) -> image, centred at ``centre``."""
    r = rng.random()  # near-horizontal, tilted, or steep (either way)
    angle = (rng.uniform(-4, 4) if r < 0.45 else rng.uniform(-30, 30) if r < 0.87
             else rng.choice([-1, 1]) * rng.uniform(30, 80))
    shear = rng.uniform(0.12, 0.35) if rng.random() < 0.2 else 0.0
    t = np.deg2rad(angle)
    c, s = np.cos(t), np.sin(t)
    to_origin = np.array([[1, 0, -pw / 2], [0, 1, -ph / 2], [0, 0, 1]])
    italic = np.array([[1, -shear, 0], [0, 1, 0], [0, 0, 1]])  # top leans right (y grows downwards)
    rotate = np.array([[c, s, 0], [-s, c, 0], [0, 0, 1]])
    to_centre = np.array([[1, 0, centre[0]], [0, 1, centre[1]], [0, 0, 1]])
    m = to_centre @ rotate @ italic @ to_origin
    if rng.random() < 0.3:  # slight perspective: jitter the warped patch corners
        src = np.array([[0, 0], [pw, 0], [pw, ph], [0, ph]], np.float32)
        dst = cv2.perspectiveTransform(src[None], m)[0]
        dst += rng.uniform(-0.12, 0.12, (4, 2)).astype(np.float32) * ph
        m = cv2.getPerspectiveTransform(src, dst.astype(np.float32))
    return m


def _warp(m: np.ndarray, pts: np.ndarray) -> np.ndarray:
    return cv2.perspectiveTransform(np.asarray(pts, np.float64).reshape(1, -1, 2), m)[0]


def _faded_colour(rng: np.random.Generator, roi: np.ndarray) -> np.ndarray:
    """Nearly the background colour: faded text that is labelled '###'."""
    mean = np.array(cv2.mean(roi)[:3])
    shift = rng.uniform(8, 22) * (1 if float(mean @ _LUMA) < 127.5 else -1)
    return np.clip(mean + shift, 0, 255).astype(np.float32)


def _text_colour(rng: np.random.Generator, roi: np.ndarray, contrast: float) -> np.ndarray:
    """A random colour ``contrast`` darker or brighter than ``roi``'s 10th / 90th luminance percentile (readable)."""
    lo, hi = np.percentile(cv2.cvtColor(roi, cv2.COLOR_BGR2GRAY)[::2, ::2], (10, 90))
    col = rng.uniform(0, 255, 3)
    cl = float(col @ _LUMA)
    if cl <= lo - contrast or cl >= hi + contrast:
        return col.astype(np.float32)
    dark_ok = lo - contrast >= 0
    bright_ok = hi + contrast <= 255
    if dark_ok and bright_ok:  # the nearer side changes the colour least
        dark = cl - lo < hi - cl
    elif dark_ok or bright_ok:  # the one side possible
        dark = dark_ok
    else:  # neither: the side with more room
        dark = lo > 255 - hi
    if dark:
        target, goal = 0.0, max(lo - contrast, 0.0)
    else:
        target, goal = 255.0, min(hi + contrast, 255.0)
    k = 1.0 if cl == target else float(np.clip((goal - cl) / (target - cl), 0, 1))
    return (col + (target - col) * k).astype(np.float32)


def _composite(img: np.ndarray, alpha: np.ndarray, m: np.ndarray, colour: np.ndarray, opacity: float) -> None:
    """Warp ``alpha`` with ``m`` and blend ``colour`` into ``img`` inside the warped bounding box only."""
    h, w = img.shape[:2]
    ph, pw = alpha.shape
    corners = _warp(m, [[0, 0], [pw, 0], [pw, ph], [0, ph]])
    x0, y0 = np.floor(corners.min(0)).astype(int)
    x1, y1 = np.ceil(corners.max(0)).astype(int) + 1
    x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, w), min(y1, h)
    if x1 <= x0 or y1 <= y0:
        return
    shift = np.array([[1, 0, -x0], [0, 1, -y0], [0, 0, 1]], np.float64)
    a = cv2.warpPerspective(alpha, shift @ m, (x1 - x0, y1 - y0), flags=cv2.INTER_LINEAR)
    weight = a.astype(np.float32) * (opacity / 255.0)
    roi = img[y0:y1, x0:x1]
    paint = np.full_like(roi, np.clip(np.round(colour), 0, 255).astype(np.uint8))
    img[y0:y1, x0:x1] = cv2.blendLinear(paint, roi, weight, 1.0 - weight)


def _free(occupied: np.ndarray, quads: list[np.ndarray], margin: float, cell: int) -> bool:
    """True when the quads (grown by ``margin`` px) touch no occupied cell of the coarse grid."""
    cand = np.zeros_like(occupied)
    pts = [np.round(q / cell).astype(np.int32) for q in quads]
    cv2.fillPoly(cand, pts, 1)
    cv2.polylines(cand, pts, True, 1, max(1, int(round(2 * margin / cell))))
    return not np.any(cand & occupied)


def _style(rng: np.random.Generator, base: int, tiny: bool, heldout: bool) -> dict:
    """Random words, font, size, faux-bold stroke and effect for one placement unit."""
    face = int(_choice(rng, _HERSHEY)) if heldout else None
    if tiny:  # too small to read: labelled '###'
        words, size = [_random_word(rng)], int(rng.uniform(0.012, 0.022) * base) + 1  # this order: same bytes
        return {"words": words, "size": size, "stroke": 0, "effect": "faded" if rng.random() < 0.3 else "none",
                "face": face}
    # Training shows lines of words more often: the gaps between words are what a word-level detector must learn.
    lines, most = (0.25, 4) if heldout else (0.6, 6)
    n_words = int(rng.integers(2, most)) if rng.random() < lines else 1
    size = max(5, int(np.exp(rng.uniform(np.log(0.04), np.log(0.15))) * base))
    stroke = max(1, int(round(size * rng.uniform(0.02, 0.05)))) if rng.random() < 0.3 else 0
    r = rng.random()
    # faded text is don't-care, as ICDAR's '###'
    if r < 0.08:
        effect = "shadow"
    elif r < 0.16:
        effect = "outline"
    elif r < 0.21:
        effect = "faded"
    else:
        effect = "none"
    words = [_random_word(rng) for _ in range(n_words)]
    return {"words": words, "size": size, "stroke": stroke, "effect": effect, "face": face}


def _find_spot(
    rng: np.random.Generator, img: np.ndarray, occupied: np.ndarray, cell: int, boxes: list[tuple], pw: int, ph: int,
    margin: float,
) -> tuple[np.ndarray, list[np.ndarray]] | None:
    """A transform putting every word box inside the image and clear of other words, or None."""
    h, w = img.shape[:2]
    for _ in range(6):
        m = _transform(rng, pw, ph, (rng.uniform(0, w), rng.uniform(0, h)))
        quads = [_warp(m, [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]) for _, (x0, y0, x1, y1) in boxes]
        inside = all(q.min() >= 0 and (q[:, 0] <= w - 1).all() and (q[:, 1] <= h - 1).all() for q in quads)
        if inside and _free(occupied, quads, margin, cell):
            return m, quads
    return None


def _place_unit(rng: np.random.Generator, img: np.ndarray, occupied: np.ndarray, cell: int, tiny: bool,
                heldout: bool) -> list[dict]:
    """Try to render one word or short line somewhere free; return its annotations (maybe empty)."""
    st = _style(rng, min(img.shape[:2]), tiny, heldout)
    words, size, effect, face = st["words"], st["size"], st["effect"], st["face"]
    alpha, origin, boxes = _render(words, size, st["stroke"], face)
    ring = None
    if effect == "outline":  # a contrasting rim: the word boxes include it
        ring, ring_origin, ring_boxes = _render(words, size, st["stroke"] + max(1, size // 15), face)
        dx, dy = origin[0] - ring_origin[0], origin[1] - ring_origin[1]
        align = np.array([[1, 0, dx], [0, 1, dy], [0, 0, 1]], np.float64)
        boxes = [(wd, (x0 + dx, y0 + dy, x1 + dx, y1 + dy)) for wd, (x0, y0, x1, y1) in ring_boxes]
    if not boxes:
        return []
    spot = _find_spot(rng, img, occupied, cell, boxes, alpha.shape[1], alpha.shape[0], 0.2 * size)
    if spot is None:
        return []
    m, quads = spot
    x0, y0 = np.clip(np.floor(np.min([q.min(0) for q in quads], 0)).astype(int), 0, None)
    x1, y1 = np.ceil(np.max([q.max(0) for q in quads], 0)).astype(int) + 1
    roi, faded = img[y0:y1, x0:x1], effect == "faded"
    # Thin anti-aliased strokes of small text never reach their full colour: ask for more contrast.
    contrast = rng.uniform(70, 130) + (40 if size < 0.07 * min(img.shape[:2]) else 0)
    colour = _faded_colour(rng, roi) if faded else _text_colour(rng, roi, contrast)
    if effect == "shadow":
        dx, dy = rng.uniform(0.04, 0.1, 2) * size
        shadow = np.array([[1, 0, dx], [0, 1, dy], [0, 0, 1]]) @ m
        _composite(img, cv2.GaussianBlur(alpha, (3, 3), 0), shadow, np.zeros(3, np.float32), 0.6)
    elif ring is not None:
        _composite(img, ring, m @ align, 255.0 - colour, 1.0)
    _composite(img, alpha, m, colour, 1.0 if faded else rng.uniform(0.85, 1.0))
    for q in quads:
        cv2.fillPoly(occupied, [np.round(q / cell).astype(np.int32)], 1)
    return [{"transcription": "###" if tiny or faded else word,
             "points": [[round(float(x), 1), round(float(y), 1)] for x, y in q]}
            for (word, _), q in zip(boxes, quads)]  # noqa: B905


def generate_image(
    rng: np.random.Generator, size: tuple[int, int] = (640, 480), heldout: bool = False
) -> tuple[np.ndarray, list[dict]]:
    """One image (size (W, H), uint8 BGR) and its quads; ``heldout``: Hershey fonts, textures, about twice the words."""
    w, h = int(size[0]), int(size[1])
    if w < 32 or h < 32:
        raise ValueError(f"size: expected (W, H) of at least 32x32 pixels, got {size!r}")
    base = min(w, h)
    aspect = w * h / base**2 * 0.75  # 1.0 for 4:3; fonts scale with the short side
    img = _background(rng, w, h, heldout)
    _draw_clutter(rng, img, int(round(rng.integers(3, 13) * aspect)))
    cell = 4
    occupied = np.zeros(((h + cell - 1) // cell + 1, (w + cell - 1) // cell + 1), np.uint8)
    annotations: list[dict] = []
    for _ in range(int(round(rng.integers(*((7, 17) if heldout else (4, 11))) * aspect))):
        annotations += _place_unit(rng, img, occupied, cell, rng.random() < 0.1, heldout)
    if rng.random() < 0.25:  # mild defocus
        img = cv2.GaussianBlur(img, (3, 3), rng.uniform(0.5, 1.0))
    return img, annotations


def _write_split(
    rng: np.random.Generator, image_dir: str, label_path: str, n: int, size: tuple[int, int], bar: tqdm, heldout: bool
) -> dict:
    os.makedirs(image_dir, exist_ok=True)
    lines, words, ignored = [], 0, 0
    for i in range(1, n + 1):
        img, anns = generate_image(rng, size, heldout)
        ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
        assert ok, "JPEG encoding failed"
        with open(os.path.join(image_dir, f"img_{i}.jpg"), "wb") as f:
            f.write(buf.tobytes())
        lines.append(format_label_line(f"img_{i}.jpg", anns) + "\n")
        ignored += sum(a["transcription"] == "###" for a in anns)
        words += len(anns)
        bar.update(1)
    with open(label_path, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(lines)
    return {"images": n, "words": words, "ignored": ignored, "image_dir": image_dir, "label_file": label_path}


def generate_dataset(
    out_dir: str, n_train: int = 100, n_val: int = 20, seed: int = 0, size: tuple[int, int] = (640, 480),
    progress: bool | None = None, n_heldout: int = 0, heldout_size: tuple[int, int] = (448, 336),
) -> dict:
    """Write ``{split}/images/img_N.jpg``, ``train_gt.txt``, ``test_gt.txt`` (+ ``heldout_gt.txt``); a summary."""
    if min(n_train, n_val, n_heldout) < 0:
        raise ValueError(f"n_train, n_val and n_heldout must be >= 0, got {n_train}, {n_val} and {n_heldout}")
    size = (int(size[0]), int(size[1]))
    progress = (n_train + n_val + n_heldout >= 50 and sys.stderr.isatty()) if progress is None else progress
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3)]
    summary = {"out_dir": out_dir, "seed": seed, "size": size}
    with tqdm(total=n_train + n_val + n_heldout, desc="synth", unit="img", disable=not progress) as bar:
        for key, rng, label, n, wh in zip(("train", "val", "heldout"), rngs,  # noqa: B905
                                          ("train_gt.txt", "test_gt.txt", "heldout_gt.txt"),
                                          (n_train, n_val, n_heldout), (size, size, heldout_size)):
            if key != "heldout" or n:
                image_dir, label_path = os.path.join(out_dir, key, "images"), os.path.join(out_dir, label)
                summary[key] = _write_split(rng, image_dir, label_path, n, wh, bar, key == "heldout")
    return summary
