"""textdet: train, evaluate, profile and deploy DBNet-family scene-text detectors."""

__version__ = "0.1.0"

# The --device help of every command (kept here so argument parsing never imports torch).
DEVICE_HELP = "cpu, cuda[:N], npu[:N] (Ascend, needs torch_npu), xpu[:N], mps (default: the accelerator if any)"
