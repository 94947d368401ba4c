"""Project errors: raised at the boundary, caught by the CLI and printed without a traceback."""

from __future__ import annotations


class TextdetError(Exception):
    """Base for every error that the CLI reports as a one-paragraph message."""


class ConfigError(TextdetError, ValueError):
    """A config file, key or value is wrong; the message names the key path (and YAML line)."""


class DataError(TextdetError):
    """A data set, label file or image cannot be used; the message names the file (and line)."""


class SampleError(DataError):
    """One sample cannot be turned into training data; the loader skips it with a warning."""


class TrainingDiverged(TextdetError):
    """Too many consecutive optimizer steps with a non-finite loss or gradients."""
