"""``-o key.path=value`` overrides, set in the raw YAML dict before the config is checked.

A transform of a ``transform_pipeline`` is addressed by its name or by its position:
``eval.dataset.transform_pipeline.DetResize.target_size`` sets the first DetResize's ``target_size``,
``eval.dataset.transform_pipeline.2.DetResize.target_size`` the DetResize at entry 2. The name stays right
when a YAML inserts a transform before it. A position is checked against the name written after it: without
that check a value meant for DetResize would land inside whatever transform sits at entry 2, in silence.
"""

from __future__ import annotations

import difflib
from typing import Any

import yaml

from textdet.errors import ConfigError

PIPELINE_KEY = "transform_pipeline"


def parse_override(text: str) -> tuple[list[str], Any]:
    """Split ``a.b.c=value`` into a key path and a YAML-parsed value."""
    if "=" not in text:
        raise ConfigError(f"-o {text!r}: expected key.path=value, e.g. -o train.loader.batch_size=4")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"-o {text!r}: empty key path")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as e:
        raise ConfigError(f"-o {text!r}: value is not valid YAML ({e})") from None
    return key.split("."), value


def transform_name(entry: Any) -> str | None:
    """The name of a pipeline entry written ``{Name: params}`` or ``Name``; None for anything else."""
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict) and len(entry) == 1:
        name = next(iter(entry))
        if isinstance(name, str):
            return name
    return None


def _listing(pipeline: list) -> str:
    """``0 DecodeImage, 1 DetLabelEncode, ...``: what a pipeline holds, for error messages."""
    if not pipeline:
        return "none"
    return ", ".join(f"{i} {transform_name(entry) or repr(entry)}" for i, entry in enumerate(pipeline))


def _first_named(pipeline: list, name: str) -> int | None:
    """The position of the first transform called ``name``, or None."""
    for index, entry in enumerate(pipeline):
        if transform_name(entry) == name:
            return index
    return None


def _closest(pipeline: list, name: str) -> str:
    """``; did you mean 'X'?`` with the pipeline's transform name closest to ``name``, or nothing."""
    names = [n for n in (transform_name(entry) for entry in pipeline) if n is not None]
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def _name_hint(pipeline: list, name: str, named_key: str) -> str:
    """How to reach transform ``name`` by name: the key to write, or the closest name the pipeline has."""
    if _first_named(pipeline, name) is not None:
        return f"; address it by name: -o {named_key}=..."
    return f"; no {name} there{_closest(pipeline, name)}"


def _entry_position(pipeline: list, pipeline_key: str, rest: list[str], written: str) -> int:
    """The position of the pipeline entry that ``rest`` (the keys after ``transform_pipeline``) addresses: a
    transform name, or a position whose entry must hold the name written after it."""
    there = f"transforms there: {_listing(pipeline)}"
    if not rest[0].isdigit():
        index = _first_named(pipeline, rest[0])
        if index is None:
            hint = _closest(pipeline, rest[0])
            raise ConfigError(f"-o {written}: no transform named '{rest[0]}' in {pipeline_key}{hint} "
                              f"({there})")
        return index
    index = int(rest[0])
    named = rest[1] if len(rest) > 1 else None  # the transform name written after the position
    hint = ""
    if named is not None:
        hint = _name_hint(pipeline, named, ".".join([pipeline_key, *rest[1:]]))
    if index >= len(pipeline):
        raise ConfigError(f"-o {written}: {pipeline_key} has no entry {index} ({there}){hint}")
    name = transform_name(pipeline[index])
    if named is not None and name is not None and name != named:
        raise ConfigError(f"-o {written}: entry {index} of {pipeline_key} is {name}, not {named} "
                          f"({there}){hint}")
    return index


def _child(node: Any, key: str) -> Any:
    """``node[key]`` for a mapping or a list (by position), None when it is not there."""
    if isinstance(node, dict):
        return node.get(key)
    if isinstance(node, list) and key.isdigit() and int(key) < len(node):
        return node[int(key)]
    return None


def with_positions(data: dict, keys: list[str]) -> list[str]:
    """``keys`` with each transform name after ``transform_pipeline`` preceded by its position:
    ``eval.dataset.transform_pipeline.DetResize.x`` -> ``eval.dataset.transform_pipeline.2.DetResize.x``.
    Errors name the key and list the transforms there."""
    written = ".".join(keys)
    positional: list[str] = []
    node: Any = data
    for i, key in enumerate(keys):
        # an absent pipeline counts as an empty one: nothing in it to set
        if positional[-1:] == [PIPELINE_KEY] and (node is None or isinstance(node, list)):
            pipeline = node or []
            index = _entry_position(pipeline, ".".join(positional), keys[i:], written)
            positional.append(str(index))
            node = pipeline[index]
            if key.isdigit():
                continue  # the position as written; the transform name, if any, is the next key
        positional.append(key)
        node = _child(node, key)
    return positional


def apply_override(data: dict, keys: list[str], value: Any) -> list[str]:
    """Set ``data[k1][k2]... = value``, creating mappings; lists are indexed by position, and a pipeline's
    transforms by name too. Returns the key path as set, with positions (see ``with_positions``)."""
    written = ".".join(keys)
    keys = with_positions(data, keys)
    node: Any = data
    for i, key in enumerate(keys[:-1]):
        if isinstance(node, list):
            index = _list_index(node, key, ".".join(keys[:i]), written)
            nxt = node[index]
            if isinstance(nxt, str) and keys[i + 1] == nxt:
                nxt = node[index] = {nxt: None}  # a transform written `- Name`, now given a parameter
        else:
            nxt = node.get(key)
            if nxt is None:
                nxt = node[key] = {}
        if not isinstance(nxt, (dict, list)):
            raise ConfigError(f"-o {written}: {'.'.join(keys[: i + 1])} is a value, not a section")
        node = nxt
    last = keys[-1]
    if isinstance(node, list):
        node[_list_index(node, last, ".".join(keys[:-1]), written)] = value
    else:
        node[last] = value
    return keys


def _list_index(node: list, key: str, list_key: str, written: str) -> int:
    """``key`` as a position in the list ``node`` (at ``list_key``); a ConfigError naming the override
    if it is not one."""
    positions = f"0 to {len(node) - 1}" if node else "none: it is empty"
    if not key.isdigit():
        raise ConfigError(f"-o {written}: {list_key} is a list: address its items by position ({positions})")
    if int(key) >= len(node):
        raise ConfigError(f"-o {written}: {list_key} has no item {key} (positions: {positions})")
    return int(key)
