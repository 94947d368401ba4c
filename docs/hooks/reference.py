"""The reference pages, generated from the code at every docs build so that they cannot drift from it.

- reference/cli.md: every ``textdet`` subcommand and flag, read from ``textdet.cli.build_parser()``;
- reference/config.md: every config key of ``textdet.config.schema`` (type, default, allowed values, what it
  means in MindOCR, why textdet ignores it) with the text of ``config_keys.py``, and the parameters of every
  model part, loss, post-processor, metric and transform, read from their constructors;
- reference/python-api.md: ``Detector``, ``load_config`` and ``Trainer`` from their signatures and docstrings.

MkDocs runs ``on_files`` (``hooks:`` in mkdocs.yml), which adds the pages in memory (nothing is written under
docs/). tests/test_docs_reference.py calls the same functions without MkDocs.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import inspect
import os
from collections.abc import Iterator
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
# Reference tables sit in a <div> (md_in_html) that stylesheets/extra.css stacks into cards on a phone.
TABLE_START = '<div class="reference-table" markdown>'
TABLE_END = "\n</div>\n"
GENERATED_NOTE = "*Generated from the code at every documentation build: it cannot drift from the program.*"


def _load_keys():
    """docs/hooks/config_keys.py (a folder of files, not a package)."""
    spec = importlib.util.spec_from_file_location("textdet_docs_config_keys", os.path.join(HERE, "config_keys.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cell(text: Any) -> str:
    """One Markdown table cell: no line breaks, no bare pipes."""
    return str(text).replace("\n", " ").replace("|", "\\|")


def _code(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return f"`{text}`" if text != "" else '`""`'


# ---- command line ---------------------------------------------------------------------------------------------

def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(full name, help, parser) of every subcommand, depth first: ``train``, ..., ``convert icdar15``, ..."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub
                for child, child_help, grandchild in _subcommands(sub):
                    yield f"{name} {child}", child_help, grandchild


def _option_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        names = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.metavar or action.dest}`"
        if action.choices is not None:
            value = " \\| ".join(f"`{c}`" for c in action.choices)
        elif action.nargs == 0:
            value = "(flag)"
        else:
            value = f"`{action.metavar or action.dest.upper()}`"
        if action.nargs in ("+", "*") or isinstance(action, argparse._AppendAction):
            value += " (repeatable)" if isinstance(action, argparse._AppendAction) else " ..."
        default = action.default
        shown = "" if default in (None, False, [], argparse.SUPPRESS) or action.nargs == 0 else _code(default)
        required = "required" if action.required or not action.option_strings else ""
        rows.append(f"| {names} | {value} | {_cell(shown or required)} | {_cell(action.help or '')} |")
    return rows


def cli_markdown(parser: argparse.ArgumentParser | None = None) -> str:
    """The command-line reference: one section per subcommand, its usage and a table of its arguments."""
    if parser is None:
        from textdet.cli import build_parser

        parser = build_parser()
    lines = ["# Command line", "", GENERATED_NOTE, "",
             "Every subcommand of `textdet`, with each argument, its values, its default and what it does. "
             "`-o key.path=value` values are parsed as YAML; `--json` prints one JSON object on stdout.", ""]
    commands = list(_subcommands(parser))
    lines += [TABLE_START, "", "| command | what it does |", "|---|---|"]
    lines += [f"| [`textdet {name}`](#textdet-{name.replace(' ', '-')}) | {_cell(text)} |"
              for name, text, _ in commands]
    lines.append(TABLE_END)
    for name, text, sub in commands:
        lines += ["", f"## textdet {name}", "", text[:1].upper() + text[1:] + "." if text else "", ""]
        usage = " ".join(sub.format_usage().split())  # argparse wraps to the terminal width: one line here
        lines += ["```", usage.removeprefix("usage: "), "```", ""]
        rows = _option_rows(sub)
        if rows:
            header = ["| argument | value | default | meaning |", "|---|---|---|---|"]
            lines += [TABLE_START, "", *header, *rows, TABLE_END]
    return "\n".join(lines) + "\n"


# ---- configuration --------------------------------------------------------------------------------------------

def schema_keys() -> list[tuple[str, str, Any]]:
    """(dotted key, type as written in schema.py, default) of every leaf of ``textdet.config.schema.Config``."""
    from textdet.config.schema import Config

    def walk(cls: type, prefix: str) -> Iterator[tuple[str, str, Any]]:
        for f in dataclasses.fields(cls):
            if f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            else:
                default = f.default
            if dataclasses.is_dataclass(default):
                yield from walk(type(default), f"{prefix}{f.name}.")
            else:
                yield f"{prefix}{f.name}", str(f.type), default

    return list(walk(Config, ""))


def type_text(annotation: str) -> str:
    """``str | None`` -> ``str or None``: a pipe would split the table cell, and escaped it shows its backslash."""
    return annotation.replace(" | ", " or ")


def wildcard(key: str) -> str:
    """``train.dataset.x`` -> ``*.dataset.x``: the form shared by train and eval sections."""
    parts = key.split(".")
    return ".".join(["*", *parts[1:]]) if len(parts) == 3 and parts[0] in ("train", "eval") else key


def key_entry(key: str, table: dict[str, str]) -> str | None:
    """The explanation of ``key``: its own entry, else its ``*.section.name`` entry."""
    if key in table:
        return table[key]
    return table.get(wildcard(key))


def ignored_reason(key: str) -> str | None:
    from textdet.config.schema import IGNORED_KEYS

    for pattern, reason in IGNORED_KEYS.items():
        if pattern == key or (pattern.startswith("*") and key.endswith(pattern[1:])):
            return reason
    return None


def _allowed(key: str) -> str:
    """Choices and lower bounds that the loader checks (config/loader.py), when it has any for ``key``."""
    from textdet.config import loader

    choices = getattr(loader, "_CHOICES", {}).get(key)
    if choices is not None:
        return "one of " + ", ".join(_code(c) for c in choices)
    least = getattr(loader, "_AT_LEAST", {}).get(key)
    return f">= {least}" if least is not None else ""


def _component_tables(notes: dict[str, str]) -> list[str]:
    """One table per component family, from the constructors (``name`` picks the class; the rest are keywords)."""
    from textdet.data.pipeline import TRANSFORMS
    from textdet.loss import LOSSES
    from textdet.metrics import METRICS
    from textdet.models.dbnet import BACKBONES, HEADS, NECKS
    from textdet.postprocess import POSTPROCESSES

    families = [("model.backbone", BACKBONES, ("in_channels",)), ("model.neck", NECKS, ("in_channels",)),
                ("model.head", HEADS, ("in_channels",)), ("loss", LOSSES, ()), ("postprocess", POSTPROCESSES, ()),
                ("metric", METRICS, ()), ("transform_pipeline", TRANSFORMS, ())]
    lines = ["## Components", "",
             "Sections that name a class (`name: DBLoss`) take that class's keyword arguments: unknown ones are "
             "errors with the closest valid name, and wrongly typed ones are refused before anything is built. "
             "Parameters set from the previous stage (a neck's `in_channels`) are not written in the config. "
             "Transforms are written `- NAME: {parameter: value}` in `transform_pipeline`. Parameters not "
             "described follow MindOCR's meaning.", ""]
    for section, table, injected in families:
        lines += [f"### `{section}`", ""]
        for name, factory in table.items():
            params = [p for n, p in inspect.signature(factory).parameters.items()
                      if n not in ("self", *injected) and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
            lines += [f"**`{name}`**", ""]
            if not params:
                lines += ["No parameters.", ""]
                continue
            lines += [TABLE_START, "", "| parameter | type | default | meaning |", "|---|---|---|---|"]
            for p in params:
                default = "required" if p.default is p.empty else _code(p.default)
                annotation = "" if p.annotation is p.empty else f"`{type_text(str(p.annotation))}`"
                note = notes.get(f"{getattr(factory, '__name__', name)}.{p.name}", "")
                lines.append(f"| `{p.name}` | {annotation} | {_cell(default)} | {_cell(note)} |")
            lines += [TABLE_END, ""]
    return lines


def config_markdown() -> str:
    """The configuration reference: every schema key (type, default, allowed values, meaning), then components."""
    keys = _load_keys()
    lines = ["# Configuration keys", "", GENERATED_NOTE, "",
             "A textdet config is a MindOCR det YAML: every key below is accepted, anchors and aliases too. Keys "
             "without a PyTorch meaning are listed once at start with the reason given here (*ignored*); unknown "
             "keys are errors naming the YAML line and the closest valid key. **textdet** marks keys MindOCR does "
             "not have. `-o key.path=value` on the command line overrides any of them (parsed as YAML).", ""]
    section = None
    for key, type_, default in schema_keys():
        top = key.split(".")[0]
        if top != section:
            if section is not None:
                lines.append(TABLE_END)
            section = top
            lines += ["", f"## `{top}`", "", TABLE_START, "", "| key, type, default | meaning |", "|---|---|"]
        meaning = key_entry(key, keys.KEYS) or ""
        if key in keys.TEXTDET_ONLY or wildcard(key) in keys.TEXTDET_ONLY:
            meaning = "**textdet**: " + meaning
        reason = ignored_reason(key)
        if reason:
            meaning += f" *Ignored*: {reason}."
        allowed = _allowed(key)
        facts = f"`{type_text(type_)}` = {_cell(_code(default))}" + (f"<br>{_cell(allowed)}" if allowed else "")
        lines.append(f"| `{key}`<br>{facts} | {_cell(meaning)} |")
    lines += [TABLE_END, "", *_component_tables(keys.COMPONENT_NOTES)]
    return "\n".join(lines) + "\n"


# ---- Python API -----------------------------------------------------------------------------------------------

def _doc(obj: Any) -> str:
    return inspect.cleandoc(obj.__doc__ or "").replace("::\n", ":\n")


def _signature(obj: Any) -> str:
    """``(name: type = default, ...) -> type`` with the annotations as written (not quoted)."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    params = []
    for p in sig.parameters.values():
        text = p.name if p.kind is not p.VAR_KEYWORD else f"**{p.name}"
        if p.annotation is not p.empty:
            text += f": {p.annotation}"
        if p.default is not p.empty:
            text += f" = {p.default!r}"
        params.append(text)
    returns = "" if sig.return_annotation is sig.empty else f" -> {sig.return_annotation}"
    one_line = f"({', '.join(params)}){returns}"
    if len(one_line) <= 90:
        return one_line
    return "(\n" + "".join(f"    {p},\n" for p in params) + f"){returns}"  # one parameter a line


def _member_lines(qualname: str, obj: Any) -> list[str]:
    return [f"### `{qualname}`", "", "```python", f"{qualname}{_signature(obj)}", "```", "", _doc(obj), ""]


def api_markdown() -> str:
    """The Python API: each public object's signature and docstring, and the public methods of each class."""
    from textdet.build.parts import build_detector, build_onnx_detector, evaluate_checkpoint
    from textdet.build.training import build_trainer
    from textdet.config import load_config
    from textdet.engine.trainer import Trainer
    from textdet.predict import Detector

    lines = ["# Python API", "", GENERATED_NOTE, "",
             "```python", "from textdet.config import load_config",
             "from textdet.build.parts import build_detector, build_onnx_detector, evaluate_checkpoint",
             "from textdet.build.training import build_trainer", "from textdet.predict import Detector", "```", "",
             "`textdet.build` turns a config into objects; the objects themselves (`Detector`, `Trainer`) take "
             "plain arguments and work without the config system.", ""]
    api = (("textdet.config", load_config), ("textdet.build.parts", build_detector),
           ("textdet.build.parts", build_onnx_detector), ("textdet.build.parts", evaluate_checkpoint),
           ("textdet.build.training", build_trainer), ("textdet.predict", Detector),
           ("textdet.engine.trainer", Trainer))
    for module, obj in api:
        lines += [f"## `{module}.{obj.__name__}`", ""]
        if inspect.isclass(obj):
            lines += _member_lines(obj.__name__, obj)
            for name, member in inspect.getmembers(obj):
                public = not name.startswith("_") or name == "__call__"
                if not public or not (inspect.isfunction(member) or inspect.ismethod(member)):
                    continue
                if member.__qualname__.split(".")[0] != obj.__name__:
                    continue  # inherited
                lines += _member_lines(f"{obj.__name__}.{name}", member)
        else:
            lines += _member_lines(obj.__name__, obj)
    return "\n".join(lines) + "\n"


PAGES = {"reference/cli.md": cli_markdown, "reference/config.md": config_markdown,
         "reference/python-api.md": api_markdown}


def on_files(files, config):
    """MkDocs hook: add the generated reference pages to the build (in memory)."""
    from mkdocs.structure.files import File

    for path, make in PAGES.items():
        files.append(File.generated(config, path, content=make()))
    return files
