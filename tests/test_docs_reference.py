"""The reference pages generated from the code (docs/hooks/reference.py, run by MkDocs at every build) list every
``textdet`` subcommand and flag, every config key with its type, default and meaning, and the Python API. The
pages are generated here without MkDocs, so the suite does not need the docs extra."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pytest

from textdet.cli import build_parser

HOOKS = Path(__file__).resolve().parents[1] / "docs" / "hooks"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"docs_hooks_{name}", HOOKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


reference = load("reference")
config_keys = load("config_keys")


def every_subparser(parser: argparse.ArgumentParser, prefix: str = ""):
    """(``train``, parser), ..., (``convert icdar15``, parser): walked here independently of the generator."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix}{name}", sub
                yield from every_subparser(sub, f"{prefix}{name} ")


@pytest.fixture(scope="module")
def cli_page() -> str:
    return reference.cli_markdown(build_parser())


def section(page: str, title: str) -> str:
    """The text of ``## title`` up to the next ``## ``."""
    start = page.index(f"\n## {title}\n")
    end = page.find("\n## ", start + 1)
    return page[start: end if end != -1 else len(page)]


def test_cli_reference_lists_every_subcommand_and_flag(cli_page):
    commands = list(every_subparser(build_parser()))
    assert len(commands) > 15  # train ... plot, and convert's formats
    for name, parser in commands:
        text = section(cli_page, f"textdet {name}")
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            for flag in action.option_strings:
                assert f"`{flag}`" in text, f"textdet {name}: {flag} is missing from the CLI reference"
            if not action.option_strings:
                assert f"`{action.metavar or action.dest}`" in text, f"textdet {name}: {action.dest} is missing"


def test_cli_reference_fails_on_a_missing_flag():
    """The check above sees a flag the page leaves out: a parser with one more flag than the page shows."""
    parser = build_parser()
    page = reference.cli_markdown(parser)
    sub = dict(every_subparser(parser))["train"]
    sub.add_argument("--a-new-flag", action="store_true")
    assert "`--a-new-flag`" not in section(page, "textdet train")
    assert "`--a-new-flag`" in section(reference.cli_markdown(parser), "textdet train")


def test_every_schema_key_has_an_explanation_and_no_entry_is_stale():
    keys = [key for key, _, _ in reference.schema_keys()]
    assert "train.guard_holdout" in keys and "eval.loader.batch_size" in keys
    missing = [key for key in keys if reference.key_entry(key, config_keys.KEYS) is None]
    assert not missing, f"config keys without an entry in docs/hooks/config_keys.py KEYS: {missing}"
    known = set(keys) | {reference.wildcard(key) for key in keys}
    stale = sorted(set(config_keys.KEYS) - known)
    assert not stale, f"KEYS entries naming no schema key (renamed or removed?): {stale}"
    assert not sorted(config_keys.TEXTDET_ONLY - known)


def test_config_reference_lists_every_key_with_type_default_and_meaning():
    page = reference.config_markdown()
    for key, type_, default in reference.schema_keys():
        row = next((line for line in page.splitlines() if line.startswith(f"| `{key}`<br>")), None)
        assert row is not None, f"{key} is missing from the config reference"
        facts = f"`{reference.type_text(type_)}` = {reference._cell(reference._code(default))}"
        assert row.startswith(f"| `{key}`<br>{facts}"), f"{key}: type {type_} or default {default!r} not shown"
        meaning = row.rsplit("|", 2)[-2].strip()
        assert meaning, f"{key}: no meaning in the config reference"
        if reference.ignored_reason(key):
            assert "*Ignored*" in row, f"{key}: the reason it is ignored is missing"


def test_every_ignored_key_is_a_schema_key():
    from textdet.config.schema import IGNORED_KEYS

    keys = [key for key, _, _ in reference.schema_keys()]
    for pattern in IGNORED_KEYS:
        matched = [k for k in keys if k == pattern or (pattern.startswith("*") and k.endswith(pattern[1:]))]
        assert matched, f"IGNORED_KEYS {pattern} matches no schema key"


def test_config_reference_lists_component_parameters():
    page = reference.config_markdown()
    components = section(page, "Components")
    for name in ("DBHead", "DBLoss", "DBPostprocess", "DetMetric", "DetResize", "PPLCNetV3", "DBFPN"):
        assert f"**`{name}`**" in components
    assert "| `ohem` |" in components and "| `step` |" in components


def test_python_api_reference_documents_detector_load_config_and_trainer():
    page = reference.api_markdown()
    for name in ("textdet.config.load_config", "textdet.build.parts.build_detector", "textdet.predict.Detector",
                 "textdet.build.training.build_trainer", "textdet.engine.trainer.Trainer"):
        assert f"## `{name}`" in page
    for method in ("build_detector", "Detector.from_onnx", "Detector.__call__", "Trainer.fit"):
        assert f"### `{method}`\n\n```python\n{method}(" in page
    assert "Images in, text polygons and scores out" in page  # the docstring itself


def test_lists_right_under_a_paragraph_get_their_blank_line_outside_code():
    lists = load("lists")
    page = "What it does:\n- one\n- two\n  more of two\n\nText.\n```\nx:\n- not a list\n```\n| a |\n"
    assert lists.loosen_lists(page) == ("What it does:\n\n- one\n- two\n  more of two\n\nText.\n```\nx:\n- not a list\n"
                                        "```\n| a |\n")
