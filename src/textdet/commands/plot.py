"""``textdet plot RUN_DIR``: the run's curves (``curves.png``, drawn with matplotlib: the ``plot`` extra) and
``report.html``, a page that shows them and links the evaluation reports found in the run folder."""

from __future__ import annotations

import json
import os
from html import escape

from textdet.errors import TextdetError
from textdet.report.figures import pyplot
from textdet.report.html import GENERATOR

# (key, title) per panel; a panel's extra series drawn with its key.
PANELS = (("loss", "train loss"), ("f-score", "eval f-score / recall / precision"), ("lr", "learning rate"),
          ("img_per_s", "train img/s"))
EXTRA = {"f-score": ("recall", "precision")}
CURVES_SIZE = (9.6, 6.0)  # inches at 100 dpi: 960 x 600 px


def read_metrics(run_dir: str) -> list[dict]:
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.isfile(path):
        raise TextdetError(f"{path} not found: plot needs a run folder written by `textdet train`")
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def draw_curves(records: list[dict], path: str) -> None:
    """Loss, eval f-score / recall / precision, learning rate and throughput per epoch, 2 x 2 panels."""
    plt = pyplot()
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(2, 2, figsize=CURVES_SIZE, dpi=100)
    for ax, (key, title) in zip(axes.flat, PANELS, strict=True):
        drawn = 0
        for name in (key, *EXTRA.get(key, ())):
            points = [(r["epoch"], r[name]) for r in records if isinstance(r.get(name), (int, float))]
            if points:
                epochs, values = zip(*points, strict=True)
                ax.plot(epochs, values, marker="o", markersize=3, label=name)
                drawn += 1
        if not drawn:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="grey")
        elif len(EXTRA.get(key, ())):
            ax.legend(fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("epoch", fontsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def find_reports(run_dir: str) -> list[str]:
    """The run folder's sub-folders holding a ``textdet eval --report`` page, the newest first."""
    found = []
    for name in sorted(os.listdir(run_dir)):
        index = os.path.join(run_dir, name, "index.html")
        if os.path.isfile(index):
            with open(index, encoding="utf-8", errors="replace") as f:
                if GENERATOR in f.read(2000):
                    found.append(name)
    written = {name: os.path.getmtime(os.path.join(run_dir, name, "index.html")) for name in found}
    return sorted(found, key=written.get, reverse=True)


def run_page(run_dir: str, records: list[dict]) -> str:
    """report.html: the curves, the last epoch's figures and links to the evaluation reports."""
    reports = find_reports(run_dir)
    if reports:
        marks = [" (the newest report)"] + [""] * (len(reports) - 1)
        links = "".join(f'<li><a href="{escape(name)}/index.html">{escape(name)}</a>{mark}</li>'
                        for name, mark in zip(reports, marks, strict=True))
        evaluations = f"<ul>{links}</ul>"
    else:
        evaluations = ("<p>None in this folder yet: <code>textdet eval -c RUN/train_config.yaml --ckpt "
                       "RUN/best.ckpt --report RUN/eval_report</code> writes one, and "
                       "<code>textdet plot RUN</code> then links it.</p>")
    last = records[-1] if records else {}
    figures = ", ".join(f"{key} {last[key]:.4g}" for key in ("loss", "recall", "precision", "f-score")
                        if isinstance(last.get(key), (int, float)))
    title = f"Run {os.path.basename(os.path.abspath(run_dir))}"
    head = f'<head><meta charset="utf-8"><title>{escape(title)}</title></head>'
    return (f'<!doctype html><html lang="en">{head}'
            '<body style="font:14px system-ui,sans-serif;margin:24px">'
            f"<h1>{escape(title)}</h1><p>{len(records)} epochs; last: {escape(figures)}</p>"
            '<img src="curves.png" alt="training curves" style="max-width:100%">'
            f"<h2>Evaluation reports</h2>{evaluations}</body></html>\n")


def plot_run(run_dir: str) -> str:
    """Write ``run_dir/curves.png`` and ``run_dir/report.html``; returns the page's path."""
    records = read_metrics(run_dir)
    draw_curves(records, os.path.join(run_dir, "curves.png"))
    path = os.path.join(run_dir, "report.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(run_page(run_dir, records))
    return path
