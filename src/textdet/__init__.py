"""textdet: train, evaluate, profile and deploy DBNet-family scene-text detectors."""

import os

__version__ = "0.1.0"

# Argument defaults and help shared by the CLI and the library, kept here so argument parsing never imports torch.
DEVICE_HELP = "cpu, cuda[:N], npu[:N] (Ascend, needs torch_npu), xpu[:N], mps (default: the accelerator if any)"
DEFAULT_OPSET = 17  # ONNX export
DEFAULT_EXPORT_HW = (640, 640)  # ONNX export input when the config's DetResize has no target_size


def textdet_home() -> str:
    """Cache folder for built-in data and compile caches: ``$TEXTDET_HOME`` or ``~/.cache/textdet``."""
    return os.environ.get("TEXTDET_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "textdet")
