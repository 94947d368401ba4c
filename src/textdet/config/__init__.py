"""MindOCR-compatible configuration: typed sections, -o overrides, ignored and unknown keys."""

from textdet.config.loader import dump_yaml, load_config, to_dict
from textdet.config.schema import Config

__all__ = ["Config", "dump_yaml", "load_config", "to_dict"]
