"""textdet: train, evaluate, profile and deploy DBNet-family scene-text detectors.
The package root holds what every part reads: the version and the cache folder."""

import os

__version__ = "0.1.0"


def textdet_home() -> str:
    """Cache folder for built-in data and compile caches: ``$TEXTDET_HOME`` or ``~/.cache/textdet``."""
    home = os.environ.get("TEXTDET_HOME")
    if home:
        return home
    return os.path.join(os.path.expanduser("~"), ".cache", "textdet")
