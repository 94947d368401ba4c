"""The report's figures, drawn with matplotlib (the ``plot`` extra, Agg backend: no display needed): recall
by word height and the f-score over the threshold grid, one series or panel per model."""

from __future__ import annotations

from textdet.errors import TextdetError
from textdet.metrics.error_kinds import ErrorTally

PLOT_EXTRA = 'pip install -e ".[plot]" (or pip install matplotlib)'
SERIES_COLOURS = ("#1f77b4", "#ff7f0e")  # the main model, the compared one


def pyplot():
    """matplotlib.pyplot on the Agg backend; a clear error naming the extra when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        raise TextdetError(f"matplotlib is not installed: it draws the figures; {PLOT_EXTRA}") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def height_figure(path: str, tallies: list[ErrorTally], labels: list[str]) -> None:
    """Bars of recall (words found / words) per word-height bin, one colour per model, the word count under
    each bin."""
    plt = pyplot()
    rows = [tally.recall_by_height() for tally in tallies]
    bins = list(rows[0])
    fig, ax = plt.subplots(figsize=(5.6, 3.4), dpi=100)
    width = 0.8 / len(rows)
    for k, (row, label) in enumerate(zip(rows, labels, strict=True)):
        xs = [i + (k - (len(rows) - 1) / 2) * width for i in range(len(bins))]
        recalls = [row[b]["found"] / row[b]["words"] if b in row else 0.0 for b in bins]
        bars = ax.bar(xs, recalls, width, label=label, color=SERIES_COLOURS[k])
        ax.bar_label(bars, labels=[f"{r:.2f}" for r in recalls], fontsize=7, padding=1)
    ax.set_xticks(range(len(bins)), [f"{b}\n{rows[0][b]['words']} words" for b in bins], fontsize=8)
    ax.set_ylim(0, 1.12)
    ax.set_ylabel("recall (words found)")
    ax.set_title("recall by word height (short side of the word's rotated box)", fontsize=10)
    if len(rows) > 1:
        ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def grid_figure(path: str, sweeps: list[dict], labels: list[str]) -> None:
    """The f-score of every (binary_thresh, box_thresh) pair as a heat map per model, the pair used outlined
    and the grid's best starred: chosen on the evaluation split, so an oracle, not a score to report."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(sweeps), figsize=(4.4 * len(sweeps), 3.8), dpi=100, squeeze=False)
    for ax, sweep, label in zip(axes[0], sweeps, labels, strict=True):
        binary = sorted({row["binary_thresh"] for row in sweep["grid"]})
        box = sorted({row["box_thresh"] for row in sweep["grid"]})
        scores = {(row["binary_thresh"], row["box_thresh"]): row["f-score"] for row in sweep["grid"]}
        table = [[scores[(b, t)] for t in box] for b in binary]
        low, high = min(min(r) for r in table), max(max(r) for r in table)
        ax.imshow(table, cmap="viridis", vmin=low, vmax=high, origin="lower", aspect="auto")
        middle = (low + high) / 2
        for i, b in enumerate(binary):
            for j, t in enumerate(box):
                colour = "black" if scores[(b, t)] > middle else "white"  # readable on viridis' yellow end
                ax.text(j, i, f"{scores[(b, t)]:.3f}", ha="center", va="center", fontsize=7, color=colour)
        fixed, best = sweep["fixed"], sweep["best"]
        if fixed["binary_thresh"] in binary and fixed["box_thresh"] in box:
            i, j = binary.index(fixed["binary_thresh"]), box.index(fixed["box_thresh"])
            ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2))
        ax.plot(box.index(best["box_thresh"]), binary.index(best["binary_thresh"]) + 0.3, marker="*",
                color="orange", markersize=9)
        ax.set_xticks(range(len(box)), [f"{t:g}" for t in box])
        ax.set_yticks(range(len(binary)), [f"{b:g}" for b in binary])
        ax.set_xlabel("box_thresh")
        ax.set_ylabel("binary_thresh")
        note = "red: pair used; star: best, chosen on the evaluation split (oracle)"
        ax.set_title(f"{label}\n{note}", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
