"""The Results and Benchmarks pages, generated from the records under docs/records/ at every docs build.

A figure lives once, in a record; the pages show it from there, and tests/test_records.py checks the
README's figures against the same records, so no copy can drift from them.

- ``docs/records/machines.yaml``: the machines, each named once by a key (``xeon-2c-bf16``, ...).
- ``docs/records/results/<task>.yaml``: one file per task (a data set). Its keys: ``order`` (its place on
  the page), ``title``, ``anchor``, ``short`` (the task in a few words, for the README's table), ``about``,
  ``columns`` ({row field: table header}), optionally ``headline`` (the summary figures other pages
  quote), ``image`` ({path, caption}), ``layout`` (shell: how to lay the data out), ``written_by``
  ({path: the command that writes that file}, for configs that exist only once a command made them),
  ``reproduce_after`` (shell: more commands), and ``rows``.
- A row holds ``data``, ``model``, ``recipe``, ``config``, ``command`` (any field whose name ends in
  ``command`` is a command), the figures (``recall``, ``precision``, ``fscore``, ``set_aside_fscore``,
  ...), ``minutes``, ``machine`` (a key of machines.yaml), ``date``, ``note``, ``evidence`` (the docs page
  where the run was written down), ``source`` ({name, url}: a figure published elsewhere); for the
  README's table, ``id``, ``zero_shot`` (the id of the row the model started from) and ``readme: true``.
- ``docs/records/benchmarks.yaml``: ``topics`` (one table each), ``written_by`` and one row per figure;
  its header comment lists the row fields.

Numbers and dates are read as written (``0.4710`` keeps its last zero): the loader keeps them as text.

MkDocs runs ``on_files`` (``hooks:`` in mkdocs.yml), which adds RESULTS.md and BENCHMARKS.md in memory
(nothing is written under docs/). tests/test_records.py calls the same functions without MkDocs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
RECORDS = HERE.parent / "records"
# Wide tables sit in a <div> (md_in_html) that stylesheets/extra.css stacks into cards on a phone.
TABLE_START = '<div class="reference-table" markdown>'
TABLE_END = "</div>"
GENERATED_NOTE = ("*Generated at every documentation build from the records in `docs/records/` "
                  "(`docs/hooks/records.py`): a figure is written once, there.*")
COMMAND_WIDTH = 100  # longer commands are wrapped before an option, with a trailing backslash


# ---- reading the records ------------------------------------------------------------------------

class RecordLoader(yaml.SafeLoader):
    """A YAML loader that keeps numbers and dates as written: ``0.4710`` stays "0.4710", not 0.471."""


def _as_written(loader: yaml.SafeLoader, node: yaml.Node) -> str:
    return loader.construct_scalar(node)


for _tag in ("float", "int", "timestamp"):
    RecordLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _as_written)


def load_yaml(path: Path) -> Any:
    with open(path, encoding="utf-8") as f:
        return yaml.load(f, Loader=RecordLoader)


def load_records(root: Path = RECORDS) -> dict[str, Any]:
    """``{"machines": {...}, "tasks": [task, ...] in page order, "benchmarks": {...}}`` from ``root``."""
    tasks = []
    for path in sorted((root / "results").glob("*.yaml")):
        task = load_yaml(path)
        task["file"] = f"results/{path.name}"
        tasks.append(task)
    tasks.sort(key=lambda task: int(task["order"]))
    return {"machines": load_yaml(root / "machines.yaml"), "tasks": tasks,
            "benchmarks": load_yaml(root / "benchmarks.yaml")}


def row_commands(row: dict[str, Any]) -> list[str]:
    """The commands of one row: the values of its fields whose name ends in ``command``."""
    return [str(value) for key, value in row.items() if key.endswith("command") and value]


# ---- Markdown pieces ----------------------------------------------------------------------------

def _cell(value: Any) -> str:
    """One Markdown table cell: no line breaks, no bare pipes."""
    return str(value).replace("\n", " ").replace("|", "\\|")


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    lines = [TABLE_START, "", "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return lines + ["", TABLE_END, ""]


def _shell_words(command: str) -> list[str]:
    """``command`` cut at the spaces outside quotes, each word as written (no quotes removed or added)."""
    words: list[str] = []
    current = ""
    quote = None
    for char in command:
        if quote is not None:
            current += char
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
            current += char
        elif char == " ":
            if current:
                words.append(current)
            current = ""
        else:
            current += char
    if current:
        words.append(current)
    return words


def _option_groups(words: list[str]) -> list[str]:
    """``["-o", "a=1", "--n", "3", "--json"]`` -> ``["-o a=1", "--n 3", "--json"]``: options with values."""
    groups: list[str] = []
    for word in words:
        previous_is_bare_option = bool(groups) and groups[-1].startswith("-") and " " not in groups[-1]
        if previous_is_bare_option and not word.startswith("-"):
            groups[-1] += " " + word
        else:
            groups.append(word)
    return groups


def wrap_command(command: str, width: int = COMMAND_WIDTH) -> list[str]:
    """A one-line shell command as lines of about ``width`` characters at most, each cut before an option."""
    if len(command) <= width:
        return [command]
    lines: list[str] = []
    current = ""
    for group in _option_groups(_shell_words(command)):
        too_long = len(current) + 1 + len(group) > width - 2  # room for the " \\" that continues the line
        if current.strip() and group.startswith("-") and too_long:
            lines.append(current + " \\")
            current = "    " + group
        else:
            current = f"{current} {group}" if current else group
    lines.append(current)
    return lines


def _indent(lines: list[str], prefix: str = "    ") -> list[str]:
    return [prefix + line if line else "" for line in lines]


def _reproduce_block(layout: str | None, written_by: dict[str, str], numbered: list[tuple[str, str]],
                     after: str | None) -> list[str]:
    """A collapsed "Reproduce" block: the data layout, the commands that write configs, the numbered ones."""
    body: list[str] = []
    if layout:
        body += ["Lay the data out (Linux shell, from your checkout):", "", "```bash",
                 *layout.rstrip().split("\n"), "```", ""]
    commands: list[str] = []
    for path, command in written_by.items():
        commands += [f"# writes {path}", *wrap_command(" ".join(str(command).split()))]
    for label, command in numbered:
        commands += [f"# {label}", *wrap_command(" ".join(command.split()))]
    if after:
        commands += after.rstrip().split("\n")
    if commands:
        body += ["The commands (numbered as in the table's last column):", "", "```bash", *commands, "```"]
    if not body:
        return []
    return ['??? note "Reproduce"', "", *_indent(body), ""]


def _number_commands(rows: list[dict[str, Any]], label_of) -> tuple[list[str], list[tuple[str, str]]]:
    """Number the rows' distinct commands in order of first use.

    Returns the command cell of each row ("(1)", "(1), (2)" or "") and [(comment, command)] for the Reproduce
    block, the comment naming the command's number and the first row that uses it.
    """
    numbers: dict[str, int] = {}
    labels: dict[str, list[str]] = {}
    cells = []
    for row in rows:
        row_numbers = []
        for command in row_commands(row):
            one_line = " ".join(command.split())
            if one_line not in numbers:
                numbers[one_line] = len(numbers) + 1
                labels[one_line] = []
            if label_of(row) not in labels[one_line]:
                labels[one_line].append(label_of(row))
            row_numbers.append(f"({numbers[one_line]})")
        cells.append(", ".join(row_numbers))
    numbered = []
    for command, number in numbers.items():
        first = labels[command][0]
        more = " (and other rows)" if len(labels[command]) > 1 else ""
        numbered.append((f"({number}) {first}{more}", command))
    return cells, numbered


def _written_by_used(written_by: dict[str, str] | None, rows: list[dict[str, Any]]) -> dict[str, str]:
    """The ``written_by`` entries whose path a row's config or command names."""
    if not written_by:
        return {}
    text = " ".join(" ".join(row_commands(row)) + " " + str(row.get("config", "")) for row in rows)
    return {path: command for path, command in written_by.items() if path in text}


def _machines_section(machines: dict[str, dict[str, str]]) -> list[str]:
    lines = ["## Machines {#machines}", "",
             "Each row names the machine it was measured on by one of these keys. `textdet doctor` "
             "prints the last column's line, which says whether bf16 runs natively there.", ""]
    rows = [[f"`{key}`", _cell(machine.get("what", "")), _cell(machine.get("instructions", "")),
             f"`{machine['doctor']}`" if machine.get("doctor") else ""]
            for key, machine in machines.items()]
    return lines + _table(["machine", "what", "instructions", "`textdet doctor`"], rows)


# ---- Results ------------------------------------------------------------------------------------

RESULTS_INTRO = (
    "Every accuracy figure textdet has measured, one table per task. Common to every table: recall (R), "
    "precision (P) and f-score (F) follow the ICDAR2015 rule (IoU > 0.5, one-to-one, `###` regions "
    "don't care); F is the last epoch's, never an epoch picked on the scoring split; \"minutes\" is the "
    "wall time of the whole training command, its evaluations included, and a row's note says when other "
    "jobs shared the machine. \"log\" links the run as it was written down at the time. Each table's "
    "\"Reproduce\" block has the commands, numbered as in its last column, and how to lay the data out. "
    "Speed: [Benchmarks](BENCHMARKS.md).")


def _result_cell(field: str, row: dict[str, Any]) -> str:
    value = row.get(field)
    if value is None or value == "":
        return ""
    if field == "fscore":
        return f"**{_cell(value)}**"
    if field == "machine":
        return f"[{value}](#machines)"
    if field == "evidence":
        return f"[log]({value})"
    if field == "config":
        return f"`{value}`"
    if field == "source":
        return f"[{_cell(value['name'])}]({value['url']})"
    return _cell(value)


def _row_label(row: dict[str, Any]) -> str:
    """How a Reproduce block's comment names the rows of a command: their model, data, protocol or what."""
    return str(row.get("model") or row.get("data") or row.get("protocol") or row.get("what") or "")


def task_markdown(task: dict[str, Any]) -> list[str]:
    """One task: its heading, what it is, its table, its figure if any, and its Reproduce block."""
    rows = task["rows"]
    columns: dict[str, str] = task["columns"]
    command_cells, numbered = _number_commands(rows, _row_label)
    headers = list(columns.values())
    has_commands = any(command_cells)
    if has_commands:
        headers.append("command")
    table_rows = []
    for row, command_cell in zip(rows, command_cells, strict=True):
        cells = [_result_cell(field, row) for field in columns]
        if has_commands:
            cells.append(command_cell)
        table_rows.append(cells)
    lines = [f"## {task['title']} {{#{task['anchor']}}}", "", " ".join(str(task["about"]).split()), ""]
    lines += _table(headers, table_rows)
    image = task.get("image")
    if image:
        lines += [f"![{image['caption']}]({image['path']})", ""]
    written_by = _written_by_used(task.get("written_by"), rows)
    lines += _reproduce_block(task.get("layout"), written_by, numbered, task.get("reproduce_after"))
    return lines


def results_markdown(records: dict[str, Any] | None = None) -> str:
    """The Results page: the common settings and machines once, then one table per task."""
    if records is None:
        records = load_records()
    lines = ["# Results", "", GENERATED_NOTE, "", RESULTS_INTRO, ""]
    lines += _machines_section(records["machines"])
    for task in records["tasks"]:
        lines += task_markdown(task)
    return "\n".join(lines) + "\n"


def _release(model: str) -> str:
    """"PP-OCRv4 mobile, fine-tuned" -> "PP-OCRv4 mobile": a row's model up to its first comma."""
    return model.split(",")[0]


def readme_results_table(records: dict[str, Any] | None = None) -> str:
    """The README's results table, from the rows marked ``readme: true`` (tests/test_records.py compares)."""
    if records is None:
        records = load_records()
    lines = ["| data | release | zero-shot | fine-tuned | minutes |", "|---|---|---|---|---|"]
    for task in records["tasks"]:
        by_id = {row["id"]: row for row in task["rows"] if "id" in row}
        for row in task["rows"]:
            if not row.get("readme"):
                continue
            start = by_id[row["zero_shot"]]
            cells = [task["short"], _release(row["model"]), start["fscore"], f"**{row['fscore']}**",
                     row["minutes"]]
            lines.append("| " + " | ".join(str(cell) for cell in cells) + " |")
    return "\n".join(lines) + "\n"


# ---- Benchmarks ---------------------------------------------------------------------------------

BENCHMARKS_INTRO = (
    "Every speed figure, and every comparison with the code textdet reproduces (MindOCR 0.5, PP-OCR's "
    "ONNX models): one row per figure, with textdet's figure, the other side's (the baseline), their ratio "
    "as measured in one run, whether both sides did the same work, the clock, the machine and the date. A "
    "ratio survives a busy machine far better than an absolute time; times taken on a shared machine say "
    "so in their note. How the figures are measured: [How speed is measured](benchmark-method.md). "
    "Accuracy: [Results](RESULTS.md).")

BENCHMARK_COLUMNS = {"what": "what", "textdet": "textdet", "baseline": "baseline", "ratio": "ratio",
                     "same_work": "same work", "clock": "clock", "machine": "machine", "date": "date"}


def _benchmark_links(row: dict[str, Any]) -> str:
    links = []
    if row.get("evidence"):
        links.append(f"[log]({row['evidence']})")
    if row.get("why"):
        links.append(f"[why]({row['why']})")
    return " ".join(links)


def benchmarks_markdown(records: dict[str, Any] | None = None) -> str:
    """The Benchmarks page: the machines once, then one table per topic, one row per figure."""
    if records is None:
        records = load_records()
    benchmarks = records["benchmarks"]
    lines = ["# Benchmarks", "", GENERATED_NOTE, "", BENCHMARKS_INTRO, ""]
    lines += _machines_section(records["machines"])
    for topic_id, topic in benchmarks["topics"].items():
        rows = [row for row in benchmarks["rows"] if row["topic"] == topic_id]
        command_cells, numbered = _number_commands(rows, _row_label)
        table_rows = []
        for row, command_cell in zip(rows, command_cells, strict=True):
            cells = [_result_cell(field, row) if field == "machine" else _cell(row.get(field, ""))
                     for field in BENCHMARK_COLUMNS]
            table_rows.append([*cells, _benchmark_links(row), command_cell])
        lines += [f"## {topic['title']} {{#{topic_id}}}", "", " ".join(str(topic["about"]).split()), ""]
        lines += _table([*BENCHMARK_COLUMNS.values(), "", "command"], table_rows)
        written_by = _written_by_used(benchmarks.get("written_by"), rows)
        lines += _reproduce_block(topic.get("layout"), written_by, numbered, topic.get("reproduce_after"))
    return "\n".join(lines) + "\n"


# ---- MkDocs -------------------------------------------------------------------------------------

PAGES = {"RESULTS.md": results_markdown, "BENCHMARKS.md": benchmarks_markdown}


def on_files(files, config):
    """MkDocs hook: add the Results and Benchmarks pages to the build (in memory)."""
    from mkdocs.structure.files import File

    records = load_records()
    for path, make in PAGES.items():
        existing = files.get_file_from_path(path)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, path, content=make(records)))
    return files


def on_config(config):
    """MkDocs hook: rebuild when a record changes under ``mkdocs serve``."""
    config.watch.append(os.fspath(RECORDS))
    return config
