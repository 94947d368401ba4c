"""Check a component spec (``{name: ..., **kwargs}``) against the class it names, before building.

Component sections (backbone, neck, head, loss, postprocess, metric, transform entries) are the
constructor arguments of a class, so the constructor signature is the schema: unknown keys get the
closest valid name and values of the wrong type are rejected with the key path and YAML line.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Mapping
from typing import Any, Callable

from textdet.errors import ConfigError


def lookup(table: Mapping[str, Any], name: Any, where: str, kind: str) -> Any:
    """``table[name]`` or a ConfigError listing the valid names and the closest one."""
    if name in table:
        return table[name]
    close = difflib.get_close_matches(str(name), list(table), n=1, cutoff=0.5)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    raise ConfigError(f"{where}: unknown {kind} '{name}'{hint} (valid: {', '.join(table)})")


def check_kwargs(fn: Callable, kwargs: Mapping[str, Any], where: str, ignore: tuple[str, ...] = ()) -> None:
    """Raise ConfigError for keyword arguments ``fn`` does not take or whose type clashes with its default."""
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    valid = [n for n, p in params.items() if n != "self" and p.kind is not inspect.Parameter.VAR_POSITIONAL]
    for key, value in kwargs.items():
        if key in ignore:
            continue
        if key not in valid:
            close = difflib.get_close_matches(str(key), valid, n=1, cutoff=0.6)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise ConfigError(f"{where}: unknown parameter '{key}'{hint} (valid: {', '.join(valid)})")
        default = params[key].default
        if not _compatible(value, default):
            raise ConfigError(
                f"{where}: parameter '{key}' expects a {type(default).__name__} like {default!r}, got {value!r}"
            )


def _compatible(value: Any, default: Any) -> bool:
    if default is inspect.Parameter.empty or default is None or value is None:
        return True
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, (int, float)):
        if isinstance(value, bool):
            return False
        if isinstance(value, (int, float)):
            return isinstance(default, float) or float(value).is_integer()
        return False
    if isinstance(default, str):
        return isinstance(value, (str, list, tuple, int, float))  # e.g. mean: imagenet | [..]
    return True
