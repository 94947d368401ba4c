"""``textdet doctor``: what this environment can do, and what to fix."""

from __future__ import annotations

import importlib
import os
import platform

import torch

from textdet import device
from textdet.watch import preflight


def _version(module: str) -> str | None:
    try:
        return getattr(importlib.import_module(module), "__version__", "installed")
    except Exception:
        return None


def run_doctor() -> int:
    """Print one line per check; return 1 when a required piece is missing."""
    problems = 0
    print(f"python        {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPU cores")

    print(f"torch         {torch.__version__}")
    for mod, pip_name in (("cv2", "opencv-python-headless"), ("pyclipper", "pyclipper"), ("shapely", "shapely"),
                          ("yaml", "PyYAML"), ("numpy", "numpy"), ("PIL", "pillow"), ("tqdm", "tqdm")):
        v = _version(mod)
        print(f"{pip_name:<13} {v or 'MISSING -> pip install ' + pip_name}")
        problems += v is None
    kind = device.accelerator()
    for i in range(torch.accelerator.device_count() if kind else 0):
        print(f"{kind}:{i:<10} {torch.get_device_module(kind).get_device_name(i)}")
    if not kind:
        print("accelerator   none: training runs on the CPU (eager; amp O1/O2 use bf16 here)")
    for kind_name in ("cpu", *([kind] if kind else [])):
        half = "bf16" if device.supports_bf16(kind_name) else "fp16 (no bf16 here)"
        print(
            f"{kind_name + ' half':<13} {half}: amp_level O1-O3 default "
            "(system.amp_dtype: bf16 | fp16 to choose; loss scaling with fp16 only)"
        )
    fast = device.cpu_bf16_fast()
    print(
        "cpu bf16      "
        + (
            "fast (AVX512-BF16/AMX): amp_level O2 can train faster than fp32 here"
            if fast
            else "emulated (no AVX512-BF16/AMX): keep amp_level O0 on this CPU (amp_level auto picks O0 here)"
        )
    )
    if device.cpu_int8_fast():
        print("cpu int8      fast (VNNI/AMX): an int8 export (textdet export --precision int8) runs faster "
              "here")
    else:
        print("cpu int8      no VNNI/AMX: an int8 export is smaller but no faster than fp32 on this CPU")
    hub = os.path.join(torch.hub.get_dir(), "checkpoints")
    found = (
        sorted(f for f in os.listdir(hub) if f.startswith(("resnet", "mobilenet")))
        if os.path.isdir(hub)
        else []
    )
    fix = (
        "no ImageNet backbones yet (pretrained: True downloads torchvision's file here on first use; "
        "offline: copy it here by hand or use -o model.backbone.pretrained=false)"
    )
    print(f"weights       {hub}: {', '.join(found) if found else fix}")
    optional = (
        ("onnx", "textdet export"),
        ("onnxruntime", "--onnx inference"),
        ("tensorboard", "TensorBoard logs"),
    )
    for mod, why in optional:
        print(f"{mod:<13} {_version(mod) or 'not installed (optional: ' + why + ')'}")
    print(
        "doctor: "
        + ("all required pieces present" if not problems else f"{problems} required package(s) missing")
    )
    return 1 if problems else 0


def run_distributed_doctor(nproc: int | None, master_addr: str, master_port: int, kind: str | None) -> int:
    """The pre-flight that every process of a torchrun job runs, for a job about to start on this machine: one
    line per check, the problem paragraphs where one fails; return 1 when any does."""
    kind = kind or device.accelerator() or "cpu"
    visible = torch.accelerator.device_count() if kind != "cpu" else 0
    nproc = nproc or visible or 2
    launch = preflight.Launch(0, 0, nproc, nproc, master_addr, master_port, agent_store=False)
    physical = [preflight.physical_id(kind, i) for i in range(min(nproc, visible))]
    held = [preflight.lock_device(kind, p) for p in physical]
    names = {device.device_name(kind, i) for i in range(len(physical))}
    checks = {
        "devices": preflight.device_problems(kind, visible, None, launch),
        "master": preflight.network_problems(launch),
        "backend": preflight.backend_problems(device.dist_backend(kind), kind),
        "environment": preflight.env_problems(),
        "pairing": [p for name in names for p in preflight.pairing_problems(kind, name, physical)],
        "free devices": [
            f"{kind} device {p} is held by {holder}: stop it or use other devices."
            for p, holder in zip(physical, held, strict=True)
            if holder
        ],
    }
    print(
        f"distributed pre-flight for {nproc} process(es) on {kind}"
        f"{f' ({visible} visible)' if kind != 'cpu' else ''}, master {master_addr}:{master_port}"
    )
    for name, problems in checks.items():
        print(f"{name:<13} {'ok' if not problems else 'PROBLEM'}")
        for problem in problems:
            print(f"  {problem}")
    failed = sum(len(p) for p in checks.values())
    print("doctor: " + ("the job can start" if not failed else f"{failed} problem(s) to fix before torchrun"))
    return 1 if failed else 0
