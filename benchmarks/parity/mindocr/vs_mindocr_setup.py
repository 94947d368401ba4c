"""What ``bench_vs_mindocr.py`` sets up before it times anything: MindOCR, the process, the data.

MindOCR is imported here and only here, and only the pieces the comparison runs (its transforms, its
``DBPostprocess`` and ``DetMetric``): a Python without MindSpore still runs textdet's side. The versions and
the machine go into the report so that a figure says where it came from; ``pin`` puts the process on one
core with a single-threaded cv2, as a loader worker runs. The data is a folder in the synthetic / ICDAR
layout (``train_gt.txt``, ``test_gt.txt``, ``train/images``, ``val/images``), generated when none is given.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import platform
import shutil
import sys
import tempfile

import cv2
import numpy as np
import pyclipper
from vs_mindocr_common import log


# ----------------------------------------------------------------------------- environment
def import_mindocr() -> tuple[dict | None, str]:
    """Import MindSpore + the MindOCR pieces we need; (modules, "") or (None, why not)."""
    os.environ.setdefault("GLOG_v", "3")  # MindSpore's C++ logging: errors only
    try:
        import mindspore as ms
        from mindocr.data.transforms import create_transforms, run_transforms
        from mindocr.metrics.det_metrics import DetMetric as MsDetMetric
        from mindocr.postprocess.det_db_postprocess import DBPostprocess as MsDBPostprocess
    except Exception as err:  # ImportError, but also RuntimeError/OSError from MindSpore's native libs
        return None, f"{type(err).__name__}: {err}"
    import mindocr

    return {
        "ms": ms,
        "create_transforms": create_transforms,
        "run_transforms": run_transforms,
        "DetMetric": MsDetMetric,
        "DBPostprocess": MsDBPostprocess,
        "mindspore_version": ms.__version__,
        "mindocr_version": getattr(mindocr, "__version__", "?"),
    }, ""


def versions(mo: dict | None) -> dict:
    """Versions of Python and of every library both sides use (MindSpore's and MindOCR's when imported)."""
    import shapely

    out = {
        "python": platform.python_version(),
        "executable": sys.executable,
        "numpy": np.__version__,
        "opencv": cv2.__version__,
        "shapely": shapely.__version__,
        "pyclipper": getattr(pyclipper, "__version__", "?"),
    }
    try:
        import torch

        out["torch"] = torch.__version__
    except Exception as err:  # torch is not needed here; report only
        out["torch"] = f"not importable ({type(err).__name__})"
    try:
        import textdet

        out["textdet"] = getattr(textdet, "__version__", "?")
    except Exception as err:
        out["textdet"] = f"not importable ({err})"
    if mo:
        out["mindspore"] = mo["mindspore_version"]
        out["mindocr"] = mo["mindocr_version"]
    return out


def machine() -> dict:
    """Platform, CPU count and model, and the cores this process may run on."""
    info = {"platform": platform.platform(), "cpu_count": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        info["affinity"] = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pass
    return info


def pin(core: int | None) -> str:
    """Pin this process to one core and make cv2 single-threaded (what a loader worker does)."""
    if core is None:
        return f"not pinned (affinity {sorted(os.sched_getaffinity(0))}, cv2 threads {cv2.getNumThreads()})"
    os.sched_setaffinity(0, {core})
    cv2.setNumThreads(1)
    return f"pinned to core {core}, cv2.setNumThreads(1)"


# ----------------------------------------------------------------------------- data
def read_label_file(path: str, image_dir: str) -> list[dict]:
    """One ``{"img_path", "label"}`` sample per line of a label file (name, tab or space, JSON label)."""
    samples = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                continue
            name, label = line.split("\t", 1) if "\t" in line else line.split(" ", 1)
            samples.append({"img_path": os.path.join(image_dir, name), "label": label})
    return samples


def prepare_data(args: argparse.Namespace) -> tuple[str, list[dict], list[dict]]:
    """(root, train samples, val samples); generates a synthetic 1280x720 set unless --data is given."""
    root = args.data
    if root is None:
        from textdet.data.synth import generate_dataset

        root = args.data_out
        if root is None:  # a throw-away set: removed when the script ends
            root = tempfile.mkdtemp(prefix="bench_vs_mindocr_")
            atexit.register(shutil.rmtree, root, ignore_errors=True)
        if not os.path.exists(os.path.join(root, "train_gt.txt")):
            w, h = (int(v) for v in args.size.lower().split("x"))
            log(f"generating {args.images} train + {args.images} val synthetic {w}x{h} images in {root}")
            generate_dataset(root, n_train=args.images, n_val=args.images, seed=args.seed, size=(w, h))
    train = read_label_file(os.path.join(root, "train_gt.txt"), os.path.join(root, "train", "images"))
    val = read_label_file(os.path.join(root, "test_gt.txt"), os.path.join(root, "val", "images"))
    return root, train[: args.images], val[: args.images]


def parse_gt(sample: dict) -> tuple[list[np.ndarray], np.ndarray]:
    """A sample's GT polygons (float32) and which of them are "don't care" (``###`` or ``*``)."""
    entries = json.loads(sample["label"])
    polys = [np.asarray(e["points"], dtype=np.float32) for e in entries]
    ignore = np.array([e.get("transcription", "") in ("###", "*") for e in entries], dtype=bool)
    return polys, ignore


def image_hw(path: str) -> tuple[int, int]:
    """Height and width of an image file (decoded, as both sides decode it)."""
    img = cv2.imdecode(np.fromfile(path, dtype=np.uint8), cv2.IMREAD_COLOR)
    return int(img.shape[0]), int(img.shape[1])
