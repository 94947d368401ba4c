"""``textdet eval --report DIR``: DIR/index.html for one model's evaluation, or for two models on the same
photos (``--compare``), with its figures and pictures beside it."""

from __future__ import annotations

import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from html import escape
from itertools import repeat

from textdet.postprocess.db_postprocess import THRESHOLD_KEYS
from textdet.report import figures
from textdet.report.draw import file_stem, write_pictures
from textdet.report.html import GENERATOR, entry, kinds_tables, legend, page, table
from textdet.report.photos import ModelRun, PhotoPair, pair_photos, worst_first


def summary_rows(runs: list[ModelRun]) -> list[list[str]]:
    """One row per figure, one column per model."""
    rows = [["model file"] + [f'<span class="muted">{escape(str(run.result.get("checkpoint")))}</span>'
                              for run in runs]]
    for key in ("recall", "precision", "f-score"):
        rows.append([key] + [f"{run.result[key]:.4f}" for run in runs])
    for key in THRESHOLD_KEYS:
        rows.append([key] + [f"{run.thresholds[key]:g} ({escape(run.source[key])})" for run in runs])
    oracle = "best pair of the grid, chosen on the evaluation split (oracle)"
    rows.append([oracle] + [best_pair(run) for run in runs])
    rows.append(["photos"] + [str(len(run.photos)) for run in runs])
    rows.append(["evaluation time"] + [f"{run.result.get('eval_time', 0.0):.1f} s" for run in runs])
    return rows


def best_pair(run: ModelRun) -> str:
    sweep = run.result.get("sweep")
    if not sweep:
        return "not computed"
    best = sweep["best"]
    pair = f"binary_thresh {best['binary_thresh']:g}, box_thresh {best['box_thresh']:g}"
    return f"{pair}: f-score {best['f-score']:.4f}"


def summary(runs: list[ModelRun], info: dict[str, str]) -> str:
    common = [[escape(key), escape(value)] for key, value in info.items()]
    return table(["", *(escape(run.label) for run in runs)], summary_rows(runs)) + table(["", ""], common)


def figures_html(out_dir: str, runs: list[ModelRun]) -> str:
    """Draw the figures that have data; each missing one says why."""
    labels = [run.label for run in runs]
    tallies = [run.tally() for run in runs]
    parts = ['<div class="row">']
    if tallies[0].words_by_height:
        figures.height_figure(os.path.join(out_dir, "recall_by_height.png"), tallies, labels)
        parts.append('<img class="figure" src="recall_by_height.png" alt="recall by word height">')
    else:
        parts.append("<p>No word that counts: no recall by height.</p>")
    sweeps = [run.result.get("sweep") for run in runs]
    if all(sweeps):
        figures.grid_figure(os.path.join(out_dir, "threshold_grid.png"), sweeps, labels)
        parts.append('<img class="figure" src="threshold_grid.png" alt="f-score over the threshold grid">'
                     '</div><p class="muted">f-score over the grid of textdet eval --sweep: the best pair is '
                     "chosen on the evaluation split (an oracle); the score to report is the one at the pair "
                     "used.</p>")
    else:
        parts.append("<p>No threshold grid (the evaluation ran without the sweep).</p></div>")
    return "".join(parts)


def one_model_gallery(out_dir: str, run: ModelRun, workers: int) -> str:
    index = {photo.path: i for i, photo in enumerate(run.photos)}
    ordered = worst_first(run.photos)
    stems = [file_stem(index[photo.path], photo.path) for photo in ordered]
    with ThreadPoolExecutor(workers) as pool:
        sizes = list(pool.map(write_pictures, repeat(out_dir), stems, [[photo] for photo in ordered]))
    entries = []
    for stem, size, photo in zip(stems, sizes, ordered, strict=True):
        missed = sum(kind not in (None, "found") for kind in photo.errors.words)
        caption = (f"<b>{escape(photo.name)}</b> f-score {photo.fscore:.2f}<br>{missed} words not found, "
                   f"{photo.n_errors - missed} wrong boxes")
        entries.append(entry(stem, size, photo.name, caption))
    return (f"<p>{len(ordered)} photos, worst first (the photo's f-score, then its error count); a thumbnail "
            f"opens the full-size picture.</p>{legend()}<div class=\"gallery\">{''.join(entries)}</div>")


def pair_caption(pair: PhotoPair, labels: list[str]) -> str:
    """The caption of one photo of the compare gallery, its change coloured (worse: red, better: green)."""
    change = pair.change
    css = "worse" if change < 0 else "better" if change > 0 else "same"
    caption = (f"<b>{escape(pair.main.name)}</b> <span class=\"{css}\">change {change:+.2f}</span> "
               f"(f-score {pair.main.fscore:.2f} vs {pair.other.fscore:.2f})<br>"
               f"words only {escape(labels[0])} finds: {len(pair.only_found_by('main'))}, "
               f"only {escape(labels[1])} finds: {len(pair.only_found_by('other'))}")
    return caption


def compare_gallery(out_dir: str, runs: list[ModelRun], workers: int) -> tuple[str, str]:
    """(the "what changed" section, the gallery): photos by change, each drawn for both models."""
    labels = [run.label for run in runs]
    pairs = pair_photos(runs[0], runs[1])
    index = {photo.path: i for i, photo in enumerate(runs[0].photos)}
    stems = [file_stem(index[pair.main.path], pair.main.path) for pair in pairs]
    titles = (labels[0], labels[1])
    with ThreadPoolExecutor(workers) as pool:
        both = [[pair.main, pair.other] for pair in pairs]
        sizes = list(pool.map(write_pictures, repeat(out_dir), stems, both, repeat(titles)))
    entries = []
    for stem, size, pair in zip(stems, sizes, pairs, strict=True):
        entries.append(entry(stem, size, pair.main.name, pair_caption(pair, labels)))
    worse = sum(pair.change < 0 for pair in pairs)
    better = sum(pair.change > 0 for pair in pairs)
    rows = [[f"photos where {escape(labels[0])} scores lower", str(worse)],
            [f"photos where {escape(labels[0])} scores higher", str(better)],
            ["photos with the same f-score", str(len(pairs) - worse - better)],
            [f"words only {escape(labels[0])} finds", str(sum(len(p.only_found_by("main")) for p in pairs))],
            [f"words only {escape(labels[1])} finds", str(sum(len(p.only_found_by("other")) for p in pairs))]]
    changed = table(["", ""], rows, True) + ('<p class="muted">change: the photo\'s f-score under '
                                       f"{escape(labels[0])} minus under {escape(labels[1])}.</p>")
    gallery = (f"<p>{len(pairs)} photos by the change, the largest drop first; left {escape(labels[0])}, "
               f"right {escape(labels[1])}; a thumbnail opens the full-size picture.</p>{legend()}"
               f"<div class=\"gallery\">{''.join(entries)}</div>")
    return changed, gallery


def folder_megabytes(folder: str) -> float:
    total = 0
    for parent, _, files in os.walk(folder):
        total += sum(os.path.getsize(os.path.join(parent, name)) for name in files)
    return total / 1e6


def clear_old_report(out_dir: str) -> None:
    """Remove the pictures of an earlier report in ``out_dir`` (only when its index.html is one of ours), so
    that photos no longer evaluated do not stay behind."""
    index = os.path.join(out_dir, "index.html")
    if not os.path.isfile(index):
        return
    with open(index, encoding="utf-8", errors="replace") as f:
        ours = GENERATOR in f.read(2000)
    for folder in ("photos", "thumbs"):
        if ours and os.path.isdir(os.path.join(out_dir, folder)):
            shutil.rmtree(os.path.join(out_dir, folder))


def write_report(out_dir: str, runs: list[ModelRun], info: dict[str, str], workers: int | None = None
                 ) -> dict:
    """Write ``out_dir/index.html`` for one run, or two (``runs[0]`` the main model, ``runs[1]`` the one it
    is compared with); ``info``: the rows every model shares (protocol, data, config, date). Returns the
    page's path, photos, seconds and megabytes."""
    start = time.perf_counter()
    figures.pyplot()  # before any picture: a missing matplotlib fails at once
    clear_old_report(out_dir)
    for folder in ("photos", "thumbs"):
        os.makedirs(os.path.join(out_dir, folder), exist_ok=True)
    workers = workers or min(4, os.cpu_count() or 1)
    labels = [run.label for run in runs]
    sections = [("Summary", summary(runs, info)), ("Error kinds over the split", kinds_tables(
        [run.tally() for run in runs], labels)), ("Figures", figures_html(out_dir, runs))]
    if len(runs) == 1:
        title = f"Evaluation report: {runs[0].label}"
        sections.append(("Photos", one_model_gallery(out_dir, runs[0], workers)))
    else:
        title = f"Evaluation report: {labels[0]} compared with {labels[1]}"
        changed, gallery = compare_gallery(out_dir, runs, workers)
        sections[1:1] = [("What changed", changed)]
        sections.append(("Photos", gallery))
    path = os.path.join(out_dir, "index.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(page(title, sections))
    return {"path": path, "photos": len(runs[0].photos), "seconds": time.perf_counter() - start,
            "megabytes": folder_megabytes(out_dir)}
