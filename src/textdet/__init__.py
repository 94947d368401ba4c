"""textdet: train, evaluate, profile and deploy DBNet-family scene-text detectors."""

__version__ = "0.1.0"
