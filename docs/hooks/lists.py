"""MkDocs hook: a list that starts right under a paragraph line becomes a list on the site too.

GitHub renders ``text:\\n- item`` as a paragraph and a list; Python-Markdown (MkDocs) needs a blank line before the
list and otherwise runs the items into the paragraph. The pages are written for both (README.md, docs/*.md read on
GitHub), so the blank line is added here, at build time, outside code fences.
"""

from __future__ import annotations

import re

LIST_ITEM = re.compile(r"^ {0,3}(?:[-*+]|\d+[.)]) ")
FENCE = re.compile(r"^\s*(```|~~~)")


def loosen_lists(markdown: str) -> str:
    """``markdown`` with a blank line before every list that follows a paragraph line directly."""
    out: list[str] = []
    fence: str | None = None
    in_list = False
    for line in markdown.split("\n"):
        opening = FENCE.match(line)
        if fence is not None:
            if opening and opening.group(1) == fence:
                fence = None
            out.append(line)
            continue
        if opening:
            fence = opening.group(1)
        elif LIST_ITEM.match(line):
            previous = out[-1] if out else ""
            if previous.strip() and not in_list and not previous.lstrip().startswith(("|", "#")):
                out.append("")
            in_list = True
        elif line.strip() and not line.startswith((" ", "\t")) and out and not out[-1].strip():
            in_list = False  # a paragraph after a blank line ends the list
        out.append(line)
    return "\n".join(out)


def on_page_markdown(markdown: str, page, config, files) -> str:
    return loosen_lists(markdown)
