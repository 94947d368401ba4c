"""The records behind the Results and Benchmarks pages (docs/records/, rendered by docs/hooks/records.py)
stay honest: every config they name exists (or a command of the record writes it), every ``textdet``
command parses with textdet's own parser, every ``benchmarks/`` script exists, every figure the README
shows is in them, and the built pages change when a record does. The checks fail on a record that breaks
them (the negative cases)."""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import io
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from textdet.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def load_hook(name: str):
    spec = importlib.util.spec_from_file_location(f"docs_hooks_{name}", DOCS / "hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


records_hook = load_hook("records")
RECORDS = records_hook.load_records()
# (name, record, written_by) of every record: each results task, and the benchmarks file
ALL_RECORDS = [(task["file"], task, task.get("written_by") or {}) for task in RECORDS["tasks"]]
ALL_RECORDS.append(("benchmarks.yaml", RECORDS["benchmarks"], RECORDS["benchmarks"].get("written_by") or {}))
FIGURE_FIELDS = ("recall", "precision", "fscore", "set_aside_fscore", "set_aside_imported_fscore",
                 "onnx_fscore")
SCRIPT = re.compile(r"benchmarks/[\w./-]+\.py")


# ---- what a record holds ------------------------------------------------------------------------

def record_rows(record: dict[str, Any]) -> list[dict[str, Any]]:
    return record["rows"]


def shell_texts(record: dict[str, Any]) -> list[str]:
    """The free shell text of a record: its data layout and extra commands (a task's, or each topic's)."""
    parts = [record.get("layout"), record.get("reproduce_after")]
    for topic in (record.get("topics") or {}).values():
        parts += [topic.get("layout"), topic.get("reproduce_after")]
    return [part for part in parts if part]


def without_comment(line: str) -> str:
    """``line`` up to its ``#`` comment (a ``#`` outside quotes, at the start or after a space)."""
    quote = None
    for index, char in enumerate(line):
        if quote is not None:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index]
    return line


def shell_commands(text: str) -> list[str]:
    """The commands of a shell text, one string each: continuation lines joined, comments dropped, split at
    ``&&`` and ``;``."""
    joined = re.sub(r"\\\n\s*", " ", text)
    commands = []
    for line in joined.split("\n"):
        for part in re.split(r"&&|;", without_comment(line)):
            if part.strip():
                commands.append(part.strip())
    return commands


def all_commands(record: dict[str, Any], written_by: dict[str, str]) -> list[str]:
    """Every command a record names: the rows' command fields, the written_by commands, its shell text."""
    commands = []
    for row in record_rows(record):
        commands += [" ".join(command.split()) for command in records_hook.row_commands(row)]
    commands += [" ".join(str(command).split()) for command in written_by.values()]
    for text in shell_texts(record):
        commands += shell_commands(text)
    return commands


def parse_textdet(command: str) -> tuple[Any | None, str]:
    """(argparse namespace, "") when ``command`` is a ``textdet`` command that parses, else (None, why)."""
    stderr = io.StringIO()
    try:
        words = shlex.split(command, comments=True)
        with contextlib.redirect_stderr(stderr):
            return build_parser().parse_args(words[1:]), ""
    except ValueError as error:  # shlex: an unclosed quote
        return None, str(error)
    except SystemExit:
        message = stderr.getvalue().strip().splitlines()
        return None, message[-1] if message else "argparse exited"


def is_textdet(command: str) -> bool:
    return command.split(" ", 1)[0] == "textdet"


def written_path(namespace: Any) -> str | None:
    """The config a command writes, where it can be read from the command (``convert ppocr``, ``train``)."""
    if namespace.command == "convert" and namespace.format == "ppocr":
        name = namespace.name or Path(namespace.model).stem
        return f"{namespace.out}/{name}.yaml"
    if namespace.command == "train":
        for override in namespace.opt:
            if override.startswith("train.ckpt_save_dir="):
                return override.split("=", 1)[1] + "/train_config.yaml"
    return None


def record_problems(name: str, record: dict[str, Any], written_by: dict[str, str]) -> list[str]:
    """What is wrong with one record, each problem naming the record: missing configs, commands that do not
    parse, missing scripts, unknown machines."""
    problems = []
    parsed = {}
    for command in all_commands(record, written_by):
        if not is_textdet(command):
            continue
        namespace, why = parse_textdet(command)
        if namespace is None:
            problems.append(f"{name}: `{command}` does not parse: {why}")
        else:
            parsed[command] = namespace
    for path, command in written_by.items():
        namespace = parsed.get(" ".join(str(command).split()))
        if namespace is not None and written_path(namespace) not in (None, path):
            problems.append(f"{name}: written_by says `{command}` writes {path}, "
                            f"it writes {written_path(namespace)}")
    configs = [str(row["config"]) for row in record_rows(record) if row.get("config")]
    configs += [namespace.config for namespace in parsed.values() if getattr(namespace, "config", None)]
    for config in configs:
        if not (REPO / config).is_file() and config not in written_by:
            problems.append(f"{name}: config {config} is neither in the repository nor written by a command "
                            "of the record (`written_by`)")
    for command in all_commands(record, written_by):
        for script in SCRIPT.findall(command):
            if not (REPO / script).is_file():
                problems.append(f"{name}: script {script} does not exist (`{command}`)")
    for row in record_rows(record):
        machine = row.get("machine")
        if machine is not None and machine not in RECORDS["machines"]:
            problems.append(f"{name}: machine {machine} is not in docs/records/machines.yaml")
    return problems


# ---- the records as they are --------------------------------------------------------------------

@pytest.mark.parametrize("name, record, written_by", ALL_RECORDS, ids=[name for name, _, _ in ALL_RECORDS])
def test_configs_exist_commands_parse_and_scripts_exist(name, record, written_by):
    assert record_problems(name, record, written_by) == []


def test_the_records_hold_textdet_commands_and_benchmark_scripts():
    """The check above is not empty: it parsed real commands and found real scripts."""
    commands = []
    for _, record, written_by in ALL_RECORDS:
        commands += all_commands(record, written_by)
    assert sum(is_textdet(command) for command in commands) > 50
    scripts = {script for command in commands for script in SCRIPT.findall(command)}
    assert "benchmarks/parity/mindocr/bench_vs_mindocr.py" in scripts and len(scripts) > 12
    assert all(script.startswith(("benchmarks/speed/", "benchmarks/parity/")) for script in scripts), scripts


BAD_RECORDS = {
    "missing config": {"rows": [{"model": "m", "config": "configs/no_such_recipe.yaml"}]},
    "missing -c config": {"rows": [{"model": "m", "command": "textdet eval -c configs/no_such.yaml"}]},
    "command that does not parse": {"rows": [{"model": "m", "command": "textdet train --no-such-flag"}]},
    "unknown subcommand": {"rows": [{"model": "m", "command": "textdet trian -c configs/db_r50.yaml"}]},
    "missing script": {"rows": [{"what": "w", "command": "python benchmarks/speed/no_such_bench.py"}]},
    "layout command that does not parse": {"layout": "textdet convert icdar15 gts --output x.txt\n",
                                           "rows": []},
    "written_by that writes elsewhere": {
        "written_by": {"ppocr_v4/ppocr_v4_mobile.yaml": "textdet convert ppocr m.onnx --out other --name x"},
        "rows": [{"model": "m", "config": "ppocr_v4/ppocr_v4_mobile.yaml"}]},
    "unknown machine": {"rows": [{"model": "m", "machine": "a-laptop"}]},
}


@pytest.mark.parametrize("case", list(BAD_RECORDS))
def test_a_broken_record_fails_the_check_and_is_named(case):
    record = BAD_RECORDS[case]
    problems = record_problems("results/broken.yaml", record, record.get("written_by") or {})
    assert problems, f"{case}: the check did not see it"
    assert all(problem.startswith("results/broken.yaml: ") for problem in problems)


def test_numbers_are_kept_as_written():
    halves = next(task for task in RECORDS["tasks"] if task["anchor"] == "icdar2015-halves")
    assert [row["recall"] for row in halves["rows"] if row.get("recall")][-1] == "0.6710"  # not 0.671
    receipts = next(task for task in RECORDS["tasks"] if task["anchor"] == "receipts")
    assert "0.9210" in [row.get("fscore") for row in receipts["rows"]]


def test_every_row_says_where_and_when_or_whose_figure_it_is():
    for task in RECORDS["tasks"]:
        for row in task["rows"]:
            if row.get("source"):
                assert row["source"]["url"].startswith("https://"), f"{task['file']}: {row}"
            else:
                assert row.get("date") and row.get("fscore"), f"{task['file']}: no date or f-score: {row}"
    for row in RECORDS["benchmarks"]["rows"]:
        assert row["topic"] in RECORDS["benchmarks"]["topics"], row
        where_and_how = row.get("machine") and row.get("date") and row.get("command")
        assert where_and_how, f"benchmarks.yaml: {row['what']}: no machine, date or command"


def test_links_of_the_records_point_at_pages_that_exist():
    rows = [row for task in RECORDS["tasks"] for row in task["rows"]] + RECORDS["benchmarks"]["rows"]
    for row in rows:
        for field in ("evidence", "why"):
            if row.get(field):
                page = row[field].split("#")[0]
                label = row.get("model") or row.get("what")
                assert (DOCS / page).is_file(), f"{label}: {field} {page} is missing"


# ---- the pages are built from the records -------------------------------------------------------

def test_changing_a_record_changes_the_built_page():
    changed = copy.deepcopy(RECORDS)
    official = next(task for task in changed["tasks"] if task["anchor"] == "icdar2015-official-split")
    v4 = next(row for row in official["rows"] if row.get("id") == "v4-fine-tuned")
    assert v4["fscore"] == "0.764"
    v4["fscore"] = "0.7777"
    benchmarks = changed["benchmarks"]["rows"]
    benchmark = next(row for row in benchmarks if row["what"].startswith("reading labels, hand"))
    benchmark["ratio"] = "31.4x"

    before = records_hook.results_markdown(RECORDS)
    after = records_hook.results_markdown(changed)
    assert "**0.764**" in before and "**0.7777**" not in before
    assert "**0.7777**" in after
    assert "| **0.7777** |" in records_hook.readme_results_table(changed)
    assert "31.4x" not in records_hook.benchmarks_markdown(RECORDS)
    assert "31.4x" in records_hook.benchmarks_markdown(changed)


def test_a_new_row_becomes_a_row_of_the_table_with_its_command():
    changed = copy.deepcopy(RECORDS)
    handwriting = next(task for task in changed["tasks"] if task["anchor"] == "handwriting")
    command = "textdet eval -c ppocr_v7/ppocr_v7_tiny.yaml -o eval.dataset.dataset_root=HW"
    handwriting["rows"].append({"model": "PP-OCRv7 tiny, zero-shot", "fscore": "0.123",
                                "machine": "xeon-2c-bf16", "date": "2027-01-01", "command": command})
    page = records_hook.results_markdown(changed)
    row = next(line for line in page.splitlines() if line.startswith("| PP-OCRv7 tiny, zero-shot |"))
    assert "**0.123**" in row and "[xeon-2c-bf16](#machines)" in row
    number = row.rstrip(" |").rsplit("| ", 1)[-1]
    assert f"# {number} PP-OCRv7 tiny, zero-shot" in page
    assert command in page


def test_results_page_has_one_section_per_task_with_its_reproduce_block():
    page = records_hook.results_markdown(RECORDS)
    for task in RECORDS["tasks"]:
        assert f"{{#{task['anchor']}}}" in page
    # every table but the published figures' has commands
    assert page.count('??? note "Reproduce"') == len(RECORDS["tasks"]) - 1
    assert "git clone --depth 1 https://github.com/ocr-algorithm-and-data/ICDAR2015 icdar2015-src" in page


def test_long_commands_are_wrapped_before_an_option_and_stay_one_command():
    command = ("textdet train -c ppocr_v4/ppocr_v4_mobile.yaml -o train.dataset.dataset_root=IC15OFF "
               "-o eval.dataset.dataset_root=IC15OFF "
               "-o \"eval.dataset.transform_pipeline.DetResize.target_size=[1,2]\"")
    lines = records_hook.wrap_command(command, width=70)
    assert len(lines) > 1
    assert all(line.endswith(" \\") for line in lines[:-1])
    assert all(line.lstrip().startswith("-") for line in lines[1:])
    assert shlex.split(" ".join(line.rstrip("\\") for line in lines)) == shlex.split(command)


# ---- no dated headings in the navigation --------------------------------------------------------

# a date, an hour, or an experiment's round, session or issue number
DATED_HEADING = re.compile(r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}:\d{2}\b|\bround\b|\bsession\b|\bissue \d+",
                           re.IGNORECASE)


class _AnyTagLoader(yaml.SafeLoader):
    """mkdocs.yml may hold ``!!python/name:`` tags (Markdown extensions): read them as plain values."""


_AnyTagLoader.add_multi_constructor("", lambda loader, suffix, node: None)


def nav_pages() -> list[str]:
    config = yaml.load((REPO / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_AnyTagLoader)

    def walk(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)
        elif isinstance(node, dict):
            for value in node.values():
                yield from walk(value)

    return list(walk(config["nav"]))


def headings(markdown: str) -> list[str]:
    found = []
    fence = False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            found.append(line)
    return found


def test_no_page_in_the_navigation_has_a_dated_heading():
    generated = {path: make(RECORDS) for path, make in records_hook.PAGES.items()}
    pages = nav_pages()
    assert "RESULTS.md" in pages and "BENCHMARKS.md" in pages and "benchmark-method.md" in pages
    for page in pages:
        if page in generated:
            text = generated[page]
        elif (DOCS / page).is_file():
            text = (DOCS / page).read_text(encoding="utf-8")
        else:
            continue  # the reference pages, generated from the code
        dated = [heading for heading in headings(text) if DATED_HEADING.search(heading)]
        assert not dated, f"{page}: headings that read as a diary: {dated}"
    assert DATED_HEADING.search("## Speed work, 2026-12-04 (issue 12)")  # what the check catches


# ---- the README's figures come from the records -------------------------------------------------

README = (REPO / "README.md").read_text(encoding="utf-8")
FSCORE = r"(?<![\w.])0\.\d{2,4}(?![\d.])"  # 0.764, 0.7723: not 0.0.22 (a version) nor 0.5 (a threshold)


def minutes_value(text: str) -> float:
    """"46.0" -> 46.0, "7 min 18 s" -> 7.3."""
    match = re.fullmatch(r"(\d+) min (\d+) s", text)
    if match:
        return int(match.group(1)) + int(match.group(2)) / 60
    return float(text)


def record_figures(records: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(every f-score-like figure, every minutes figure) of the results records, as written; a headline range
    ("0.86 to 0.87") adds both ends."""
    scores, minutes = set(), set()
    for task in records["tasks"]:
        for row in task["rows"]:
            scores.update(str(row[field]) for field in FIGURE_FIELDS if row.get(field))
            if row.get("minutes"):
                minutes.add(str(row["minutes"]))
        headline = task.get("headline")
        if headline:
            scores.update(str(headline["fscore"]).split(" to "))
            minutes.update(str(headline["minutes"]).split(" to "))
    return scores, minutes


def readme_figures_not_in_records(readme: str, records: dict[str, Any]) -> list[str]:
    """The f-scores (0.xxx) and minutes ("N minutes", "A to B minutes") of the README that no record holds as
    written: a figure rounded differently from its record is missing too."""
    scores, minutes = record_figures(records)
    missing = [figure for figure in re.findall(FSCORE, readme) if figure not in scores]
    for first, last in re.findall(r"(\d+(?:\.\d+)?)(?: to (\d+(?:\.\d+)?))? minutes", readme):
        missing += [m for m in (first, last) if m and m not in minutes]
    return missing


def test_readme_results_table_is_the_one_the_records_give():
    table = records_hook.readme_results_table(RECORDS)
    assert table.count("\n") == 6  # the header, its rule and four rows
    assert table in README, f"README.md's results table differs from the records; it should read:\n{table}"


def test_every_fscore_and_minutes_in_the_readme_is_in_the_records():
    assert readme_figures_not_in_records(README, RECORDS) == []
    assert len(re.findall(FSCORE, README)) > 15  # the check saw the README's figures


@pytest.mark.parametrize("sentence", ["scored **0.655** on the other 250", "in 12.5 minutes on 2 cores",
                                      "f-score 0.86 to 0.88 in 7 to 9 minutes", "MindOCR's DBNet 0.7724"])
def test_a_readme_figure_missing_from_the_records_is_found(sentence):
    assert readme_figures_not_in_records(README + "\n" + sentence + "\n", RECORDS) != []


def test_headline_figures_match_their_rows():
    """The built-in recipe's "0.86 to 0.87 in 7 to 9 minutes": its rows on the headline's data and
    machine, f-scores rounded to two decimals and minutes to whole ones."""
    task = next(task for task in RECORDS["tasks"] if task.get("headline"))
    headline = task["headline"]
    rows = [row for row in task["rows"]
            if row["data"] == headline["data"] and row["machine"] == headline["machine"]]
    assert len(rows) >= 2
    fscores = [float(row["fscore"]) for row in rows]
    minutes = [minutes_value(str(row["minutes"])) for row in rows]
    assert headline["fscore"] == f"{min(fscores):.2f} to {max(fscores):.2f}"
    assert headline["minutes"] == f"{round(min(minutes))} to {round(max(minutes))}"
    assert f"f-score {headline['fscore']} in {headline['minutes']} minutes" in README
