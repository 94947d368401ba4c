"""MindOCR-compatible configuration: typed sections, -o overrides, ignored and unknown keys."""

from textdet.config.components import check_kwargs, lookup
from textdet.config.loader import (
    ConfigMeta,
    apply_override,
    config_from_dict,
    dump_yaml,
    get_key,
    load_config,
    parse_override,
    to_dict,
)
from textdet.config.schema import Config

__all__ = [
    "Config", "ConfigMeta", "apply_override", "check_kwargs", "config_from_dict", "dump_yaml", "get_key", "load_config",
    "lookup", "parse_override", "to_dict",
]
