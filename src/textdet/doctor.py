"""``textdet doctor``: what this environment can do, and what to fix."""

from __future__ import annotations

import importlib
import os
import platform


def _version(module: str) -> str | None:
    try:
        return getattr(importlib.import_module(module), "__version__", "installed")
    except Exception:
        return None


def run_doctor() -> int:
    """Print one line per check; return 1 when a required piece is missing."""
    import torch

    problems = 0
    print(f"python        {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPU cores")
    print(f"torch         {torch.__version__} (CUDA build: {torch.version.cuda or 'no'})")
    for mod, pip_name in (("cv2", "opencv-python-headless"), ("pyclipper", "pyclipper"), ("shapely", "shapely"),
                          ("yaml", "PyYAML"), ("numpy", "numpy"), ("PIL", "pillow"), ("tqdm", "tqdm")):
        v = _version(mod)
        print(f"{pip_name:<13} {v or 'MISSING -> pip install ' + pip_name}")
        problems += v is None
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            print(f"cuda:{i}        {p.name}, {p.total_memory / 2**30:.0f} GiB, bf16 "
                  f"{'yes' if torch.cuda.is_bf16_supported() else 'no'}")
    else:
        print("cuda          none: training runs on the CPU (eager; amp O1/O2 use bf16 here)")
    flags = set(open("/proc/cpuinfo").read().split()) if os.path.exists("/proc/cpuinfo") else set()
    if flags:
        print(f"cpu features  avx2 {'yes' if 'avx2' in flags else 'no'}, avx512 "
              f"{'yes' if 'avx512f' in flags else 'no'}, amx {'yes' if 'amx_bf16' in flags else 'no'}"
              + ("" if "avx512_bf16" in flags or "amx_bf16" in flags else
                 " -> bf16 autocast (O1/O2) is emulated here and usually slower than fp32 on this CPU"))
    hub = os.path.join(torch.hub.get_dir(), "checkpoints")
    found = sorted(f for f in os.listdir(hub) if f.startswith(("resnet", "mobilenet"))) if os.path.isdir(hub) else []
    fix = ("no ImageNet backbones yet (pretrained: True downloads torchvision's file here on first use; "
           "offline: copy it here by hand or use -o model.backbone.pretrained=false)")
    print(f"weights       {hub}: {', '.join(found) if found else fix}")
    optional = (("onnx", "textdet export"), ("onnxruntime", "--onnx inference"), ("tensorboard", "TensorBoard logs"))
    for mod, why in optional:
        v = _version(mod)
        print(f"{mod:<13} {v or 'not installed (optional: ' + why + ')'}")
    print("doctor: " + ("all required pieces present" if not problems else f"{problems} required package(s) missing"))
    return 1 if problems else 0
