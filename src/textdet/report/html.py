"""The report page's HTML: one static file, its images beside it (no server, no network): the summary, the
error-kind tables, the figures and the gallery. Every value a user can type (paths, names) is escaped."""

from __future__ import annotations

from html import escape

from textdet.metrics.error_kinds import DETECTION_KINDS, WORD_KINDS

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1200px;padding:0 16px;color:#222}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:6px 0}
td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}.muted{color:#666;font-size:12px}
.legend span{display:inline-block;margin-right:14px}.swatch{display:inline-block;width:14px;height:10px;
margin-right:4px;vertical-align:middle}.fill{opacity:.55}.line{background:none!important;border:3px solid}
.gallery{display:flex;flex-wrap:wrap;gap:10px}figure{margin:0;width:min-content;min-width:200px}
figure img{display:block;border:1px solid #ccc}figcaption{font-size:12px;overflow-wrap:anywhere}
.row{display:flex;flex-wrap:wrap;gap:0 40px;align-items:flex-start}h3{margin:10px 0 2px}
.worse{color:#c22}.better{color:#282}img.figure{max-width:100%}
"""
# Marks every image: data-loaded="1" when it decoded (complete and naturalWidth > 0), "0" otherwise; the
# body's data-images says "loaded/all" (a headless browser's dumped DOM shows whether the page is whole).
SCRIPT = """
window.addEventListener("load", function () {
  var images = document.images, loaded = 0;
  for (var i = 0; i < images.length; i++) {
    var ok = images[i].complete && images[i].naturalWidth > 0;
    images[i].dataset.loaded = ok ? "1" : "0";
    if (ok) loaded++;
  }
  document.body.dataset.images = loaded + "/" + images.length;
});
"""
# (colour, fill or line, text): what draw.py paints, in CSS colours.
LEGEND = (("#28aa3c", "fill", "word found"),
          ("#e62828", "fill", "word not found (missed, partial or merged)"),
          ("#969696", "fill", "### region (does not count)"), ("#28aa3c", "line", "detection matched"),
          ("#ff9600", "line", "detection wrong (merged, loose, fragment, on nothing)"),
          ("#969696", "line", "detection in a ### region"))
GENERATOR = '<meta name="generator" content="textdet eval --report">'
KIND_NAMES = {"background": "on nothing", "ignored": "in ### regions", "partial": "partly found (loose box)"}


def table(header: list[str], rows: list[list[str]], numbers: bool = False) -> str:
    """Rows of already-escaped cells; ``numbers``: the columns after the first hold counts (right-aligned)."""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = []
    for row in rows:
        cells = f"<td>{row[0]}</td>" + "".join(f'<td class="n">{c}</td>' if numbers else f"<td>{c}</td>"
                                              for c in row[1:])
        body.append(f"<tr>{cells}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def share(count: int, total: int) -> str:
    return f"{count} ({100 * count / total:.1f}%)" if total else str(count)


def kinds_tables(tallies: list, labels: list[str]) -> str:
    """Words and detections by kind, one column per model (counts and shares of the whole split)."""
    header = ["", *(escape(label) for label in labels)]
    word_rows = [[escape(KIND_NAMES.get(kind, kind))] + [share(t.words[kind], sum(t.words.values()))
                                                        for t in tallies] for kind in WORD_KINDS]
    word_rows.append(["all words that count"] + [str(sum(t.words.values())) for t in tallies])
    det_rows = [[escape(KIND_NAMES.get(kind, kind))] + [share(t.detections[kind], sum(t.detections.values()))
                                                       for t in tallies] for kind in DETECTION_KINDS]
    det_rows.append(["all detections"] + [str(sum(t.detections.values())) for t in tallies])
    return (f'<div class="row"><div><h3>Words</h3>{table(header, word_rows, True)}</div>'
            f"<div><h3>Detections</h3>{table(header, det_rows, True)}</div></div>"
            '<p class="muted">A detection is matched (IoU &gt; 0.5 with a word), in a ### region (over half '
            "of it inside one), merged (covers over half of two or more words), loose (best IoU 0.2 to 0.5), "
            "a fragment (over 20% of it inside a word) or on nothing, tested in that order. A word is found "
            "(a matched box), in a merged box, partly found (only a loose box) or missed. IoU as ICDAR 2015 "
            "computes it, whatever the protocol.</p>")


def legend() -> str:
    items = []
    for colour, style, text in LEGEND:
        css = f"background:{colour}" if style == "fill" else f"border-color:{colour}"
        items.append(f'<span><i class="swatch {style}" style="{css}"></i>{escape(text)}</span>')
    return f'<p class="legend">{"".join(items)}</p>'


def entry(stem: str, size: tuple[int, int], name: str, caption: str) -> str:
    """One gallery entry: the thumbnail, linking to the full-size picture, and its caption (escaped HTML)."""
    width, height = size
    return (f'<figure class="photo" id="{stem}"><a href="photos/{stem}.jpg">'
            f'<img src="thumbs/{stem}.jpg" width="{width}" height="{height}" alt="{escape(name)}"></a>'
            f"<figcaption>{caption}</figcaption></figure>")


def page(title: str, sections: list[tuple[str, str]]) -> str:
    """The whole document: ``sections`` are (heading, HTML body); an empty heading adds no h2."""
    parts = [f"<h2>{escape(heading)}</h2>{body}" if heading else body for heading, body in sections]
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"{GENERATOR}"
            f'<meta name="viewport" content="width=device-width"><style>{STYLE}</style></head>'
            f"<body><h1>{escape(title)}</h1>{''.join(parts)}<script>{SCRIPT}</script></body></html>\n")
