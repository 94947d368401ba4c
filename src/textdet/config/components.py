"""Build a component from its spec (``name`` + keyword arguments): the constructor signature is the schema, so
unknown keys get the closest valid name and wrong types are rejected before anything is built, alike everywhere."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from textdet.errors import ConfigError

# Annotation names (as written under `from __future__ import annotations`) and what they accept.
_SIMPLE_TYPES: dict[str, tuple[type, ...]] = {
    "bool": (bool,), "int": (int,), "float": (int, float), "str": (str,), "None": (type(None),)}


# The model part names of models/dbnet.py's tables, readable without torch: `textdet train` checks them
# before the 2 s torch import (a test keeps the two in step).
MODEL_PART_NAMES: dict[str, tuple[str, ...]] = {
    "backbone": ("det_resnet18", "det_resnet34", "det_resnet50", "det_mobilenet_v3", "PPLCNetV3",
                 "PPLCNetV4"),
    "neck": ("DBFPN", "RSEFPN", "RepLKFPN"),
    "head": ("DBHead",),
}


def lookup(table: Mapping[str, Any], name: Any, where: str, kind: str) -> Any:
    """``table[name]`` or a ConfigError listing the valid names and the closest one."""
    if name in table:
        return table[name]
    close = difflib.get_close_matches(str(name), list(table), n=1, cutoff=0.5)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    raise ConfigError(f"{where}: unknown {kind} '{name}'{hint} (valid: {', '.join(table)})")


def check_kwargs(fn: Callable, kwargs: Mapping[str, Any], where: str, injected: tuple[str, ...] = ()) -> None:
    """ConfigError for keyword arguments ``fn`` does not take or mistypes, or ``injected`` ones (set by the caller)."""
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    valid = [n for n, p in params.items()
             if n != "self" and n not in injected and p.kind is not inspect.Parameter.VAR_POSITIONAL]
    for key, value in kwargs.items():
        if key in injected:
            raise ConfigError(f"{where}: '{key}' is set from the previous stage; remove it from the config")
        if key not in valid:
            close = difflib.get_close_matches(str(key), valid, n=1, cutoff=0.6)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise ConfigError(f"{where}: unknown parameter '{key}'{hint} (valid: {', '.join(valid) or 'none'})")
        expected = _expected_types(params[key])
        if expected and not _matches(value, expected):
            names = " or ".join(t.__name__ for t in expected)
            raise ConfigError(f"{where}: parameter '{key}' expects {names}, got {value!r}")


def build_component(table: Mapping[str, Callable], name: Any, kwargs: Mapping[str, Any], where: str, kind: str,
                    **injected: Any) -> Any:
    """``table[name](**injected, **kwargs)`` after the checks above; constructor errors become ConfigErrors."""
    factory = lookup(table, name, f"{where}.name" if kind != "transform" else where, kind)
    check_kwargs(factory, kwargs, f"{where} ({name})", tuple(injected))
    try:
        return factory(**injected, **kwargs)
    except ConfigError:
        raise
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{where} ({name}): {e}") from e


def _expected_types(param: inspect.Parameter) -> tuple[type, ...]:
    """Types a parameter accepts, from a simple annotation (``float``, ``int | None``) or its default."""
    ann = param.annotation
    if isinstance(ann, str):
        parts = [p.strip() for p in ann.split("|")]
        if all(p in _SIMPLE_TYPES for p in parts):
            return tuple(t for p in parts for t in _SIMPLE_TYPES[p])
        return ()  # anything richer (sequences, unions with classes): the constructor validates
    for kind, accepted in ((bool, (bool,)), (float, (int, float)), (int, (int,))):  # bool first: it is an int too
        if isinstance(param.default, kind):
            return accepted
    return ()


def _matches(value: Any, expected: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in expected
    if isinstance(value, float) and int in expected and float not in expected:
        return value.is_integer()
    return isinstance(value, expected)


def component_repr(obj: Any, **shown: Any) -> str:
    """``Name(param=value, ...)`` over the ``__init__`` parameters ``obj`` keeps; ``shown`` replaces values."""
    fields = {p: getattr(obj, p) for p in inspect.signature(type(obj)).parameters if hasattr(obj, p)}
    return f"{type(obj).__name__}({', '.join(f'{k}={v!r}' for k, v in {**fields, **shown}.items())})"
