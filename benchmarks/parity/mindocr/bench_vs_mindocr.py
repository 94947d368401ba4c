"""textdet vs MindOCR, side by side in one process: input pipeline, post-processing, metric.

Runs under a Python that has BOTH textdet and MindOCR (MindSpore) installed, e.g. a throw-away venv
outside the repository (never the system Python, never CI)::

    python -m venv ~/venvs/mindocr && V=~/venvs/mindocr/bin
    $V/pip install torch==2.13.0 mindspore==2.7.0 mindocr==0.5.0 "huggingface_hub<1.0" \
        opencv-python-headless pyclipper PyYAML tqdm numpy
    $V/pip install "shapely>=2" "pillow>=10.1"     # a second step: mindocr's pins refuse them in one resolve
    $V/pip install -e . --no-deps
    $V/python benchmarks/parity/mindocr/bench_vs_mindocr.py [--data DIR] [--json]

(mindocr 0.5.0 pins shapely~=1.8 and Pillow<=9.5; textdet needs shapely>=2 and Pillow>=10.1, which
MindOCR's detection code works with, so the venv has the newer ones: both sides then use the very
same numpy / cv2 / shapely / pyclipper builds.)

Parts (each in its own try/except; a failing part prints why and the others still run):

(a) pipeline: the user's training ``transform_pipeline`` (``--config``, default
    configs/mindocr_db_r50_user.yaml) built by MindOCR's own ``create_transforms`` with
    ``{"is_train": True, "use_minddata": False}`` (what ``DetDataset`` passes) and run with
    ``run_transforms``; and by textdet as training runs it in a loader worker:
    ``split_device_normalize(build_transforms(pipeline, fuse=True))``, i.e. without the trailing
    NormalizeImage + ToCHWImage, which ``textdet.runtime.feed.DeviceInput`` does per batch on the
    device. That device step is timed on its own (``DeviceInput.images`` on a uint8 CPU batch of 8,
    ms per sample; on a GPU it is far cheaper). For information and continuity with the figures
    before 2026-12-02, the full pipeline with normalisation in the worker ("textdet-full") and
    ``fuse=False`` (the sequential reference) run in the same rounds. Same images in the same order, seeded RNGs
    (``np.random.seed`` + MindSpore's dataset seed for MindOCR, ``np.random.default_rng`` for
    textdet); rounds interleaved (M, T, F, S, S, F, T, M, ...) so that load changes on a shared machine
    hit every side.
    A sample's time includes handing it off as a loader must: the output columns as C-contiguous
    arrays (MindOCR's ToCHWImage returns a transposed *view*, whose copy MindOCR pays later when
    the batch is made; textdet's is already contiguous). By default the process is pinned to ONE
    core with ``cv2.setNumThreads(1)``, as in a loader worker ("the same images and core").
(b) per-transform ms for both sides (MindOCR: a timer around each transform; textdet:
    ``Compose.timing``), and a few "what-if" micro-benchmarks of the dominant textdet steps.
(c) post-processing: MindOCR's ``DBPostprocess`` vs textdet's, built from the config's
    ``postprocess`` section, on the same 736x1280 probability maps, batch 1 (MindOCR's eval batch
    size): "gt" = the eval GT rasterised as perfect predictions (each polygon shrunk as in training,
    filled with P ~ U[0.85, 0.99], Gaussian-blurred); "blobs" = 30 rotated text lines per map on a
    noisy background; ``--maps FILE.npy`` adds saved maps (N,H,W) or (N,1,H,W) (``--save-maps`` writes
    the "gt" set). Reports ms per map, the ratio, and whether both find the same boxes.
(d) metric: MindOCR's ``DetMetric`` vs textdet's on the same predictions and GT (near-perfect = the
    post-processed "gt" maps; noisy = jittered, some dropped, some false positives), results side by
    side, plus a constructed duplicate-detection case where they must differ (MindOCR counts a
    second detection of an already matched GT as nothing; the ICDAR protocol and textdet count it as
    a false positive), and images/s.

Output: human-readable text, a final summary table; ``--json`` prints one JSON object on stdout
(the text then goes to stderr); ``--json-out FILE`` writes it to a file as well.

The code: this file reads the command line, sets the process up and runs the parts; beside it,
``vs_mindocr_setup.py`` (MindOCR's import, versions, pinning, the data), ``vs_mindocr_common.py`` (output
and the interleaved timing), one module per part (``vs_mindocr_pipeline.py`` for (a) and (b),
``vs_mindocr_postprocess.py`` for (c), ``vs_mindocr_metric.py`` for (d)) and ``vs_mindocr_report.py`` (the
text after each part and the summary).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import warnings
from typing import Any

import numpy as np
import yaml
from vs_mindocr_common import fail, loadavg, log, set_clock, set_output
from vs_mindocr_metric import bench_metric
from vs_mindocr_pipeline import bench_pipeline
from vs_mindocr_postprocess import bench_postprocess
from vs_mindocr_report import log_metric, log_pipeline, log_postprocess, print_summary
from vs_mindocr_setup import import_mindocr, machine, parse_gt, pin, prepare_data, versions

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG_CANDIDATES = [
    os.path.join(HERE, "..", "..", "..", "configs", "mindocr_db_r50_user.yaml"),
]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line; ``--map-size`` comes back as an (H, W) tuple."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--data",
        help="data root in the synthetic/ICDAR layout (train_gt.txt, test_gt.txt, "
        "train/images, val/images); default: generate one",
    )
    ap.add_argument("--data-out", help="where to generate the data (default: a new temp folder); reused if present")
    ap.add_argument("--images", type=int, default=30, help="images per split (default 30)")
    ap.add_argument("--size", default="1280x720", help="generated image size WxH (default 1280x720)")
    ap.add_argument("--config", help="MindOCR YAML (default: configs/mindocr_db_r50_user.yaml)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--rounds", type=int, default=7, help="(a) interleaved timing rounds per side")
    ap.add_argument("--passes", type=int, default=2, help="(a) passes over the images per round")
    ap.add_argument("--profile-passes", type=int, default=2, help="(b) passes for the per-transform profile")
    ap.add_argument("--pp-rounds", type=int, default=15, help="(c) rounds over all maps per side")
    ap.add_argument("--metric-rounds", type=int, default=30, help="(d) rounds over all images per side")
    ap.add_argument("--map-size", default="736x1280", help="(c) probability map HxW (default 736x1280)")
    ap.add_argument(
        "--maps",
        help="(c) extra saved probability maps .npy (N,H,W)/(N,1,H,W); "
        "an optional FILE_shape_list.npy beside it gives [src_h, src_w, sh, sw] rows",
    )
    ap.add_argument("--save-maps", help="(c) save the 'gt' maps to this .npy (and _shape_list.npy)")
    ap.add_argument("--parts", default="a,c,d", help="comma list of parts to run: a (includes b), c, d")
    ap.add_argument("--core", type=int, help="core to pin to (default: the last one this process may use)")
    ap.add_argument("--no-pin", action="store_true", help="do not pin; cv2 keeps its default thread count")
    ap.add_argument("--no-mindocr", action="store_true", help="run textdet's side only")
    ap.add_argument("--json", action="store_true", help="print one JSON object on stdout (text goes to stderr)")
    ap.add_argument("--json-out", help="also write the JSON object to this file")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: time each call by this process's CPU time, robust to other load on the core")
    ap.add_argument("--malloc", choices=("keep", "default"), default="keep",
                    help="keep: glibc keeps freed buffers, as textdet's loader workers set it (keep_freed_memory); "
                         "default: glibc's own trimming. Either way both sides share this process's setting")
    args = ap.parse_args(argv)
    args.map_size = tuple(int(v) for v in args.map_size.lower().split("x"))
    return args


def set_up_process(args: argparse.Namespace) -> str:
    """Pin the process (unless --no-pin), pick the clock and the allocator; the line that says how."""
    if args.no_pin:
        core = None
    elif args.core is not None:
        core = args.core
    else:
        core = sorted(os.sched_getaffinity(0))[-1]  # the last core this process may use
    pinning = pin(core) + f", clock {args.clock}"
    if args.malloc == "keep":
        from textdet.data.dataset import keep_freed_memory

        pinning += ", malloc keep" if keep_freed_memory() else ", malloc default (not glibc)"
    else:
        pinning += ", malloc default"
    return pinning


def run_pipeline_part(args: argparse.Namespace, mo: dict | None, cfg: dict, train: list[dict]) -> dict:
    """Part (a) (with (b)) on the train images; its result, or why it failed."""
    log(f"\n(a) training pipeline: {args.rounds} interleaved rounds x {args.passes} passes x {len(train)} images")
    try:
        pipeline = bench_pipeline(args, mo, cfg, train)
        log_pipeline(pipeline)
        return pipeline
    except Exception as err:
        return fail("a (pipeline)", err)


def run_postprocess_part(args: argparse.Namespace, mo: dict | None, cfg: dict,
                         val: list[dict]) -> tuple[dict, dict | None]:
    """Part (c) on the val images: (its result for the report, the full result with the "gt" boxes or None)."""
    log(f"\n(c) post-processing: {args.pp_rounds} interleaved rounds per map set, maps {args.map_size}")
    try:
        pp = bench_postprocess(args, mo, cfg, val)
        reported = {k: v for k, v in pp.items() if not k.startswith("_")}
        log_postprocess(pp)
        return reported, pp
    except Exception as err:
        return fail("c (post-processing)", err), None


def run_metric_part(args: argparse.Namespace, mo: dict | None, cfg: dict, val: list[dict], pp: dict | None,
                    ran_postprocess: bool) -> dict:
    """Part (d) on the val images; its result, or why it failed.

    Its near-perfect predictions are part (c)'s boxes on the "gt" maps; when (c) was not asked for, a
    one-round run of (c) finds them (and when that fails, (d) scores the GT itself)."""
    log(f"\n(d) metric: {args.metric_rounds} interleaved rounds")
    try:
        if pp is None and not ran_postprocess:
            try:
                quick = argparse.Namespace(**{**vars(args), "pp_rounds": 1, "maps": None, "save_maps": None})
                pp = bench_postprocess(quick, mo, cfg, val)
            except Exception:
                pp = None
        metric = bench_metric(args, mo, val, pp)
        log_metric(metric)
        return metric
    except Exception as err:
        return fail("d (metric)", err)


def main(argv: list[str] | None = None) -> int:
    """Run the parts asked for and report; 0, or 2 when there is no config or no data."""
    args = parse_args(argv)
    set_clock(args.clock)
    if args.json:
        set_output(sys.stderr)
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    warnings.filterwarnings("ignore", category=DeprecationWarning)

    result: dict[str, Any] = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "loadavg_start": loadavg(),
        "machine": machine(),
    }
    result["pinning"] = set_up_process(args)
    if args.no_mindocr:
        mo, why = None, "--no-mindocr given"
    else:
        mo, why = import_mindocr()
    if mo is None:
        log(f"!! MindOCR is not usable here, its side is SKIPPED ({why}). textdet's side still runs; no ratios.")
        result["mindocr_skipped"] = why
    result["versions"] = versions(mo)
    log(f"{result['date']}  {result['machine'].get('cpu_model', '?')}  {result['pinning']}")
    log("versions: " + ", ".join(f"{k} {v}" for k, v in result["versions"].items() if k != "executable"))

    config_path = args.config or next((p for p in DEFAULT_CONFIG_CANDIDATES if os.path.exists(p)), None)
    if not config_path or not os.path.exists(config_path):
        log("!! no config: pass --config path/to/mindocr_db_r50_user.yaml")
        return 2
    with open(config_path, encoding="utf-8") as f:
        cfg = yaml.safe_load(f)
    result["config"] = os.path.abspath(config_path)
    try:
        root, train, val = prepare_data(args)
    except Exception as err:
        result["data"] = fail("data", err)
        log("!! no data, nothing to time (pass --data DIR)")
        return 2
    result["data"] = {
        "root": root,
        "train_images": len(train),
        "val_images": len(val),
        "words_per_train_image": float(np.mean([len(parse_gt(s)[0]) for s in train])),
    }
    log(
        f"data: {root}: {len(train)} train / {len(val)} val images, "
        f"{result['data']['words_per_train_image']:.1f} words per train image"
    )

    if "a" in parts:
        result["pipeline"] = run_pipeline_part(args, mo, cfg, train)
    pp = None
    if "c" in parts:
        result["postprocess"], pp = run_postprocess_part(args, mo, cfg, val)
    if "d" in parts:
        result["metric"] = run_metric_part(args, mo, cfg, val, pp, ran_postprocess="c" in parts)
    result["loadavg_end"] = loadavg()
    print_summary(result)
    text = json.dumps(result, indent=1, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o))
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    if args.json:
        print(text, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
