"""Load MindOCR det YAML (anchors, aliases) into the typed ``Config``; errors name key, YAML line, closest key."""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import logging
import os
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Union

import yaml

from textdet.config.overrides import PIPELINE_KEY, apply_override, parse_override
from textdet.config.schema import IGNORED_KEYS, Config
from textdet.errors import ConfigError


@dataclass
class ConfigMeta:
    """Where a config came from: the file, each key's line, overrides and the ignored keys found."""

    path: str | None = None
    lines: dict[str, int] = field(default_factory=dict)
    overrides: list[str] = field(default_factory=list)
    ignored: list[tuple[str, str]] = field(default_factory=list)
    # an override that names a transform -> the same key with its position, which the YAML lines use:
    # eval.dataset.transform_pipeline.DetResize.x -> eval.dataset.transform_pipeline.2.DetResize.x
    positions: dict[str, str] = field(default_factory=dict)

    def where(self, key_path: str) -> str:
        """``file:line`` (or ``-o`` / ``default``) for a dotted key path, for error messages; a transform in
        the path may be given by its position or by its name."""
        positional = self.positional_path(key_path)
        for text in self.overrides:
            written = text.split("=", 1)[0].strip()
            if positional in (written, self.positions.get(written, written)):
                return f"-o {written}"
        probe = positional
        while probe:
            if probe in self.lines:
                return f"{self.path}:{self.lines[probe]}"
            probe = probe.rpartition(".")[0]
        return self.path or "built-in config"

    def positional_path(self, key_path: str) -> str:
        """``...transform_pipeline.DetResize.x`` -> ``...transform_pipeline.2.DetResize.x``: a transform
        given by name gets the position of the first of that name, as an override set it or as the YAML file
        has it."""
        if key_path in self.positions:
            return self.positions[key_path]
        parts = key_path.split(".")
        for i in range(1, len(parts)):
            if parts[i - 1] != PIPELINE_KEY or parts[i].isdigit():
                continue
            pipeline_key = ".".join(parts[:i])
            index = 0
            while f"{pipeline_key}.{index}" in self.lines:
                if f"{pipeline_key}.{index}.{parts[i]}" in self.lines:
                    return ".".join([*parts[:i], str(index), *parts[i:]])
                index += 1
        return key_path


def _line_map(node: yaml.Node, prefix: str = "", out: dict[str, int] | None = None) -> dict[str, int]:
    """Map each dotted key path in a composed YAML tree to its 1-based line number."""
    out = {} if out is None else out
    children = []  # (key, the node whose line the key gets, the value node)
    if isinstance(node, yaml.MappingNode):
        children = [(k.value, k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value != "<<"]
    elif isinstance(node, yaml.SequenceNode):
        children = [(i, item, item) for i, item in enumerate(node.value)]
    for key, key_node, value_node in children:
        path = f"{prefix}.{key}" if prefix else str(key)
        out.setdefault(path, key_node.start_mark.line + 1)
        _line_map(value_node, path, out)
    return out


def read_yaml(path: str) -> tuple[dict, dict[str, int]]:
    """Read a YAML file into a dict plus a key-path -> line map; errors name the file and line."""
    if not os.path.isfile(path):
        raise ConfigError(f"config file not found: {path}")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        # the context mark points at the construct left open (e.g. the '[' never closed), the
        # problem mark at where the parser gave up, often the end of the file
        mark = getattr(e, "context_mark", None) or getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else path
        context = f"{e.context}: " if getattr(e, "context", None) else ""
        raise ConfigError(f"{where}: not valid YAML: {context}{getattr(e, 'problem', e)}") from None
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections, got {type(data).__name__}")
    return data, (_line_map(node) if node is not None else {})


def _ignored_reason(path: str) -> str | None:
    parts = path.split(".")
    return IGNORED_KEYS.get(path, IGNORED_KEYS.get("*." + ".".join(parts[1:])) if len(parts) == 3 else None)


def _type_name(tp: Any) -> str:
    return "null" if tp is type(None) else getattr(tp, "__name__", str(tp).replace("typing.", ""))


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """Check ``value`` against a dataclass field type; accept ints for floats and '1e-6' strings."""
    origin = typing.get_origin(tp)
    if origin is Union or origin is types.UnionType:
        options = typing.get_args(tp)
        for opt in options:
            try:
                return _coerce(value, opt, where)
            except ConfigError:
                continue
        names = " or ".join(_type_name(o) for o in options)
        raise ConfigError(f"{where}: expected {names}, got {value!r} ({type(value).__name__})")
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is Any or (tp in (bool, str) and isinstance(value, tp)) or (tp is type(None) and value is None):
        return value
    if tp is int and number and (isinstance(value, int) or value.is_integer()):
        return int(value)
    if tp is float and (number or isinstance(value, str)):  # PyYAML reads 1e-6 (no dot) as a string
        with contextlib.suppress(ValueError):
            return float(value)
    if tp in (list, dict) or origin in (list, dict):
        base = origin or tp
        if isinstance(value, base) or (base is dict and value is None):
            return value if value is not None else {}
    elif tp not in (bool, int, float, str, type(None)):
        raise AssertionError(f"unsupported schema type {tp}")
    raise ConfigError(f"{where}: expected {_type_name(tp)}, got {value!r} ({type(value).__name__})")


def _default_component_name(f: dataclasses.Field) -> str | None:
    """The ``name`` of a component section's default (postprocess, metric, loss), if any."""
    if f.default_factory is dataclasses.MISSING:
        return None
    default = f.default_factory()
    return default.get("name") if isinstance(default, dict) else None


class _Builder:
    """Turns raw nested dicts into the dataclass tree, collecting ignored keys."""

    def __init__(self, meta: ConfigMeta):
        self.meta = meta

    def build(self, cls: type, data: Any, prefix: str) -> Any:
        data = {} if data is None else data
        if not isinstance(data, dict):
            raise ConfigError(f"{self.meta.where(prefix)}: '{prefix}' must be a mapping, got {data!r}")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        hints = typing.get_type_hints(cls)
        kwargs = {}
        for key, value in data.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in fields:
                close = difflib.get_close_matches(str(key), list(fields), n=1, cutoff=0.6)
                hint = f"; did you mean '{prefix + '.' if prefix else ''}{close[0]}'?" if close else ""
                valid = ", ".join(fields)
                raise ConfigError(f"{self.meta.where(path)}: unknown key '{path}'{hint} (valid keys: {valid})")
            reason = _ignored_reason(path)
            if reason is not None and value not in (None, False, {}, [], ""):
                self.meta.ignored.append((path, reason))
            tp = hints[key]
            default_name = _default_component_name(fields[key])
            if default_name and isinstance(value, dict) and "name" not in value:
                value = {"name": default_name, **value}  # e.g. -o postprocess.box_thresh=0.5 alone
            kwargs[key] = (self.build(tp, value, path) if dataclasses.is_dataclass(tp)
                           else _coerce(value, tp, f"{self.meta.where(path)}: '{path}'"))
        return cls(**kwargs)


def config_from_dict(data: dict, meta: ConfigMeta | None = None) -> Config:
    """Validate a raw nested dict (as read from YAML) into a ``Config``; ``cfg.meta`` says where from."""
    meta = meta or ConfigMeta()
    cfg = _Builder(meta).build(Config, data, "")
    _check_values(cfg, meta)
    cfg.meta = meta  # type: ignore[attr-defined]  # not a field: stays out of the saved YAML
    return cfg


def load_config(path: str | None, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """Load a MindOCR-style YAML file (or the built-in defaults when ``path`` is None) plus ``-o`` overrides."""
    data, lines = read_yaml(path) if path else ({}, {})
    meta = ConfigMeta(path=path, lines=lines, overrides=list(overrides))
    for text in overrides:
        keys, value = parse_override(text)
        positional = apply_override(data, keys, value)
        if positional != keys:
            meta.positions[".".join(keys)] = ".".join(positional)
    return config_from_dict(data, meta)


_CHOICES = {
    "system.amp_level": ("O0", "O1", "O2", "O3", "auto"),  # auto (textdet): O2 where half is native
    "system.amp_level_infer": ("O0", "O1", "O2", "O3"),
    "system.mode": (0, 1),
    "system.amp_dtype": ("bf16", "fp16", None),
    "system.ckpt_save_policy": ("top_k", "latest_k", None),
    "loss_scaler.type": ("static", "dynamic"),
    "model.type": ("det",),
    "train.ema_resume": ("keep", "reset"),
    "train.accumulation_lr": ("window_end", "mindocr"),
    **dict.fromkeys(("train.dataset.cache_images", "eval.dataset.cache_images"), (True, False, "auto")),
}
_AT_LEAST = {
    **dict.fromkeys(("train.loader.batch_size", "eval.loader.batch_size", "train.gradient_accumulation_steps",
                     "scheduler.num_epochs", "system.log_interval", "system.val_interval"), 1),
    **dict.fromkeys(("train.loader.num_workers", "eval.loader.num_workers", "system.ckpt_max_keep",
                     "train.guard_regions", "train.dataset.min_epoch_samples", "train.max_blank_steps"), 0),
}


def _check_values(cfg: Config, meta: ConfigMeta) -> None:
    """Range and choice checks that a type alone cannot express."""
    for path, choices in _CHOICES.items():
        value = get_key(cfg, path)
        if value not in choices:
            raise ConfigError(f"{meta.where(path)}: '{path}' must be one of {list(choices)}, got {value!r}")
    for path, least in _AT_LEAST.items():
        if get_key(cfg, path) < least:
            raise ConfigError(f"{meta.where(path)}: '{path}' must be >= {least}, got {get_key(cfg, path)}")
    if log_level(cfg.system.log_level) is None:
        raise ConfigError(f"{meta.where('system.log_level')}: 'system.log_level' must be a logging level such as "
                          f"logging.INFO or WARNING, got {cfg.system.log_level!r}")
    interval = cfg.train.ckpt_interval_steps
    if interval not in ("auto", "off", False) and (type(interval) is not int or interval < 0):
        raise ConfigError(f"{meta.where('train.ckpt_interval_steps')}: 'train.ckpt_interval_steps' must be a step "
                          f"count >= 0, 'auto' (every 10 minutes) or 'off', got {interval!r}")
    if cfg.eval.dataset.min_epoch_samples:
        where = meta.where("eval.dataset.min_epoch_samples")
        raise ConfigError(f"{where}: 'eval.dataset.min_epoch_samples' repeats training photos; an evaluation "
                          "scores each photo once: remove it (or set 0)")
    parse_buckets(cfg.eval.shape_buckets, meta.where("eval.shape_buckets"))
    timeout = cfg.train.step_timeout
    if timeout != "auto" and (isinstance(timeout, (bool, str)) or timeout <= 0):
        raise ConfigError(f"{meta.where('train.step_timeout')}: 'train.step_timeout' must be seconds > 0 or 'auto' "
                          f"(10 minutes, then 20x the median step), got {timeout!r}")


def parse_buckets(value: Any, where: str = "eval.shape_buckets") -> str | list[tuple[int, int]] | None:
    """``eval.shape_buckets`` as given: None (off), "auto", or [H, W] pairs of positive integers (smallest
    area first, duplicates dropped); ``where``: the file:line or -o the value came from, for the error."""
    if value is None or value == "auto":
        return value
    pairs = value if isinstance(value, list) and value else None
    shapes = []
    for pair in pairs or []:
        if not (isinstance(pair, list) and len(pair) == 2 and all(type(x) is int and x > 0 for x in pair)):
            pairs = None
            break
        shapes.append((pair[0], pair[1]))
    if pairs is None:
        raise ConfigError(f"{where}: eval.shape_buckets must be auto or a list of [H, W] pairs of positive "
                          f"integers, e.g. [[736, 1280], [1280, 736]], got {value!r}")
    return sorted(set(shapes), key=lambda s: (s[0] * s[1], s))


def log_level(value: str) -> int | None:
    """MindOCR's ``system.log_level`` ("logging.INFO", "INFO", 20) as a number, or None when unknown."""
    name = str(value).removeprefix("logging.").upper()
    level = int(name) if name.isdigit() else logging.getLevelName(name)
    return level if isinstance(level, int) else None


@contextlib.contextmanager
def located(cfg: Config, key: str) -> Iterator[None]:
    """Prefix a ConfigError raised inside with where ``key`` is set (file:line or -o)."""
    try:
        yield
    except ConfigError as e:
        meta = getattr(cfg, "meta", None)
        where = meta.where(key) if meta is not None else key
        msg = str(e)
        if msg.startswith(where):
            raise ConfigError(msg) from None
        raise ConfigError(f"{where}: {msg}" if msg.startswith(key) else f"{where}: {key}: {msg}") from None


def get_key(cfg: Any, path: str) -> Any:
    """``get_key(cfg, "train.loader.batch_size")`` on dataclasses and dicts alike."""
    node = cfg
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else getattr(node, part)
    return node


def to_dict(cfg: Config) -> dict:
    """The resolved config as plain nested dicts (for YAML files and checkpoints)."""
    return dataclasses.asdict(cfg)


def dump_yaml(cfg: Config, path: str) -> None:
    """Write the resolved config as YAML (the run folder's ``train_config.yaml``)."""
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(to_dict(cfg), f, sort_keys=False, allow_unicode=True)
