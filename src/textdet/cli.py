"""``textdet`` command line: one subcommand per job, errors as one paragraph; torch is imported per command."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time

from textdet import __version__
from textdet.data.annotations import SHAPES
from textdet.data.formats import FORMATS
from textdet.errors import ConfigError, TextdetError
from textdet.export_defaults import DEFAULT_EXPORT_HW, DEFAULT_OPSET

_T_MAIN = time.time()

BENCH_PARTS = ("data", "model", "train", "postprocess", "eval", "predict")
DEVICE_HELP = ("cpu, cuda[:N], npu[:N] (Ascend, needs torch_npu), xpu[:N], mps "
               "(default: the accelerator if any)")
PROFILE_HELP = ("a torch.profiler trace of steps START..STOP-1 (counted from 1) into RUN_FOLDER/profile/ (opens in "
                "TensorBoard and Perfetto); the top operators are printed")


def _add_config_args(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("-c", "--config", required=required, help="MindOCR-style YAML config")
    p.add_argument("-o", "--opt", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override a config value (YAML-parsed), repeatable: -o train.loader.batch_size=4")


def _add_protocol(p: argparse.ArgumentParser) -> None:
    p.add_argument("--protocol", choices=("icdar15", "deteval", "tiou"), help="matching rule: icdar15 (IoU > 0.5, "
                   "one-to-one; the default), deteval (ICDAR 2013: splits and merges), tiou (tightness-aware IoU)")


def _add_tile_args(p: argparse.ArgumentParser, default_note: str) -> None:
    p.add_argument("--tile", metavar="HxW", help="read pages larger than HxW pixels in overlapping tiles of "
                   "that size, each tile resized as an image that size would be (choose the size of a photo "
                   "the detector reads well), the maps stitched into one (a word cut by a tile edge comes "
                   f"out once); smaller pages as without it{default_note}")
    p.add_argument("--overlap", type=int, metavar="PX", help="pixels neighbouring tiles share (default: "
                   "eval.tile_overlap, else a fifth of the tile's shorter side: 128 for 640x640)")


def _add_public_set_args(p: argparse.ArgumentParser, example_out: str, what: str, max_side: int) -> None:
    p.add_argument("input", metavar="SRC", help="the clone of the data set's repository")
    p.add_argument("--out", required=True, help=f"folder to lay the data set out in, e.g. {example_out}")
    p.add_argument("--num", type=int, default=120,
                   help=f"{what} to take, evenly spaced over the sorted names, alternately to train and "
                   "to val")
    p.add_argument("--max-side", type=int, default=max_side,
                   help="images larger than this on their long side are shrunk to it, with their labels")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="textdet", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("train", help="train a detector (no -c: the built-in synthetic recipe)")
    _add_config_args(p, required=False)
    p.add_argument("--dry-run", action="store_true", help="validate config, data and model, print the banner, exit")
    p.add_argument("--device", help=DEVICE_HELP)
    p.add_argument("--compile", choices=("auto", "on", "off"), default="auto",
                   help="torch.compile: auto = when system.mode is 0 on CUDA")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--overwrite", action="store_true", help="replace another run's files in train.ckpt_save_dir")
    p.add_argument("--profile", metavar="START:STOP", help=PROFILE_HELP)

    p = sub.add_parser("eval", help="evaluate a checkpoint (or an ONNX model) on the config's eval set")
    _add_config_args(p)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--ckpt", help="checkpoint (default: eval.ckpt_load_path)")
    which.add_argument("--onnx", help="evaluate an ONNX model (ours or an external DB-style export) instead")
    p.add_argument("--device")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--no-progress", action="store_true")
    _add_protocol(p)
    p.add_argument("--sweep", action="store_true", help="also score a grid of binary_thresh x box_thresh on the "
                   "same model outputs; its best pair is tuned on the evaluation split (an oracle)")
    p.add_argument("--report", metavar="DIR",
                   help="also write DIR/index.html: the figures, the error kinds, the threshold grid and "
                   "every photo drawn with labels and detections (opens from disk; needs matplotlib: the "
                   "plot extra)")
    p.add_argument("--compare", metavar="CKPT_OR_ONNX",
                   help="with --report: evaluate this checkpoint or ONNX model on the same photos too, and "
                   "draw the two side by side")
    _add_tile_args(p, " (-o eval.tile=[H,W] in the config)")

    p = sub.add_parser("predict", help="detect text in images/folders -> predictions.json (+ drawn images)")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="image files or folders (jpg/jpeg/png/bmp)")
    _add_config_args(p, required=False)
    p.add_argument("--ckpt", help="checkpoint (with -c; default: predict/eval.ckpt_load_path)")
    p.add_argument("--onnx", help="ONNX model: a textdet export or an external DB-style model (e.g. PP-OCR det)")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.add_argument("--draw", action="store_true", help="also write DIR/<stem>_det.jpg with the boxes drawn")
    p.add_argument("--format", choices=("json", "labelme"), default="json", help="labelme: also write DIR/<stem>.json "
                   "labelme files (labelme IMAGES --output DIR to correct them, then textdet convert labelme DIR)")
    p.add_argument("--device", help=DEVICE_HELP)
    p.add_argument("--batch-size", type=int, default=8, help="images per forward (one input shape a batch)")
    p.add_argument("--shape-buckets", metavar="auto|HxW,...",
                   help="pad each resized image to the smallest of a few shapes (auto: up to 4 chosen "
                   "from the inputs; default: the config's eval.shape_buckets)")
    _add_tile_args(p, " (default: the config's eval.tile)")

    p = sub.add_parser("export", help="export a checkpoint to ONNX (checked against PyTorch)")
    _add_config_args(p)
    p.add_argument("--ckpt", help="checkpoint (default: predict/eval.ckpt_load_path)")
    p.add_argument("--out", required=True, metavar="MODEL.onnx", help="ONNX file to write")
    p.add_argument("--height", type=int, help="traced/checked input height (default: the config's DetResize "
                   f"target, else {DEFAULT_EXPORT_HW[0]}); every size works after export")
    p.add_argument("--width", type=int,
                   help=f"traced/checked input width (default as --height, {DEFAULT_EXPORT_HW[1]})")
    p.add_argument("--opset", type=int, default=DEFAULT_OPSET, help="ONNX opset version")
    p.add_argument("--precision", choices=("fp32", "int8"), default="fp32",
                   help="int8: ONNX Runtime's static quantization, calibrated on --calib; both models are "
                   "scored on the eval split and the int8 one is written only if its f-score stays within "
                   "--max-drop")
    p.add_argument("--calib", metavar="DIR_OR_LABEL_FILE", help="int8: the photos to calibrate on, a folder "
                   "or a label file (default: the config's training split)")
    p.add_argument("--calib-photos", type=int, default=64, metavar="N",
                   help="int8: calibrate on at most N photos, evenly spaced (default 64)")
    p.add_argument("--max-drop", type=float, default=0.01, metavar="F",
                   help="int8: refuse a model whose f-score falls more than F below fp32's (default 0.01)")

    p = sub.add_parser("bench", help="time one part alone: data, model, train, postprocess, eval, predict")
    p.add_argument("part", choices=BENCH_PARTS, help="what to time")
    _add_config_args(p)
    p.add_argument("--n", type=int, help="samples (data), iterations (model), steps (train), maps (postprocess), "
                   "images (eval, predict); default per part: 64, 10, 10, 20, 50, 50")
    p.add_argument("--warmup", type=int, help="untimed iterations first; default 3 for model and train, else 1")
    p.add_argument("--device", help=DEVICE_HELP)
    p.add_argument("--threads", type=int, help="torch intra-op threads in this process (default: torch's choice)")
    p.add_argument("--maps", metavar="DIR", help="postprocess: DIR/*.npy probability maps, (1,1,H,W) or (H,W) "
                   "float32, optional DIR/shapes.json {stem: [orig_h, orig_w]} (default: maps drawn from eval GT)")
    p.add_argument("--ckpt", help="eval: checkpoint to load (default: a randomly initialised model)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--profile", metavar="START:STOP", help="train: " + PROFILE_HELP)

    p = sub.add_parser("synth", help="write a synthetic ICDAR2015-layout data set")
    p.add_argument("out_dir")
    p.add_argument("--train", type=int, default=100)
    p.add_argument("--val", type=int, default=20)
    p.add_argument("--heldout", type=int, default=0, help="images in heldout/ (other seed, 448x336, Hershey fonts, "
                   "texture backgrounds, denser text): a test of generalisation, not of memory")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--size", default="640x480", help="WxH, e.g. 1280x720")

    p = sub.add_parser("convert", help="convert labels, checkpoints and models from other tools to textdet's")
    formats = p.add_subparsers(dest="format", metavar="FORMAT", required=True)
    q = formats.add_parser("icdar15", help="ICDAR2015 gt_img_N.txt folder -> MindOCR label file")
    q.add_argument("gt_dir")
    q.add_argument("--out", required=True, help="label file to write")
    q.add_argument("--image-prefix", default="", help="prefix for image paths in the label file")
    q = formats.add_parser("ppocr", help="PP-OCR det model (ONNX) -> DIR/model.ckpt + DIR/NAME.yaml")
    q.add_argument("model", help="the .onnx file (rapidocr-onnxruntime ships ch_PP-OCRv4_det_infer.onnx)")
    q.add_argument("--out", required=True, help="folder to write model.ckpt and the YAML into")
    q.add_argument("--name", help="YAML file name and run name (default: the model's file name)")
    for name, reader in FORMATS.items():
        q = formats.add_parser(name, help=reader.__doc__.splitlines()[0])
        q.add_argument("input")
        q.add_argument("--out", required=True, help="label file to write (a folder with --to labelme)")
        q.add_argument("--to", choices=("label", "labelme"), default="label",
                       help="label: a MindOCR/PaddleOCR label file; labelme: one labelme JSON per image, to review")
        q.add_argument("--image-dir", help="the folder image names are relative to (labelme input: default the "
                       "input folder; --to labelme: where the images are, default .)")
        q.add_argument("--shape", choices=SHAPES, default="outline",
                       help="each region as drawn (outline), or its convex hull, or its minimum-area "
                       "rectangle (quad): outlines that hug the ink (line masks) fall apart under DB's "
                       "shrink; convert reports them")
        if name == "cocotext":
            q.add_argument("--split", choices=("train", "val"), help="which images, when the file holds both")
    q = formats.add_parser("sroie", help="ICDAR 2019 SROIE receipts (a clone of zzzDavid/ICDAR-2019-SROIE) "
                           "-> OUT/train, OUT/val and their label files")
    _add_public_set_args(q, "DOC", "receipts", max_side=1600)
    q = formats.add_parser("copiste", help="BAnQ's Copiste d'un jour handwritten pages (a clone of "
                           "banq-dcn/Copiste-d-un-jour) -> OUT/train, OUT/val and their label files")
    _add_public_set_args(q, "HW", "pages", max_side=1100)
    q = formats.add_parser("mindocr", help="MindOCR/MindSpore .ckpt (file or URL) -> textdet checkpoint")
    q.add_argument("input")
    q.add_argument("--out", required=True, help="textdet checkpoint to write")
    q.add_argument("-c", "--config", help="check every tensor against this config's model (names and shapes)")
    q.add_argument("-o", "--opt", nargs="*", default=[], metavar="KEY=VALUE", help="overrides for -c")

    p = sub.add_parser("metric", help="score detections: ICDAR gt_img_N.txt/res_img_N.txt folders or label files")
    p.add_argument("--gt", required=True)
    p.add_argument("--pred", required=True)
    p.add_argument("--json", action="store_true")
    _add_protocol(p)

    p = sub.add_parser("check-data", help="validate the train and eval sets, report every problem")
    _add_config_args(p)
    p.add_argument("--dump", metavar="DIR", help="also write the first processed training samples (.npz + .png)")
    p.add_argument("--n", type=int, default=8, help="samples to dump")
    p.add_argument("--ceiling", nargs="?", const="outline", choices=SHAPES, metavar="SHAPE",
                   help="also score the eval set's labels against themselves as a model that learned its "
                   "training targets exactly would: each region redrawn as SHAPE (outline: as labelled, the "
                   "default; hull; quad), its DB target drawn as training does, the config's post-processing "
                   "run on it")

    p = sub.add_parser("doctor", help="check the environment and say what to fix")
    p.add_argument("--distributed", action="store_true", help="run the distributed pre-flight for a job about to "
                   "start here (devices, master port, backend, pairing, environment)")
    p.add_argument("--nproc", type=int, help="--distributed: processes per node (default: the visible devices, 2 on "
                   "a CPU)")
    p.add_argument("--master-addr", default=os.environ.get("MASTER_ADDR", "127.0.0.1"))
    p.add_argument("--master-port", type=int, default=int(os.environ.get("MASTER_PORT", "29500")))
    p.add_argument("--device", help="--distributed: cpu, cuda, npu, xpu (default: the accelerator torch sees)")

    p = sub.add_parser("plot", help="draw curves.png from a run folder's metrics.jsonl (matplotlib) and "
                       "report.html, which shows it and links the evaluation reports in the run folder")
    p.add_argument("run_dir")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        print(__version__)
        return 0
    if not args.command:
        parser.print_help()
        return 0
    try:
        exit_code = COMMANDS[args.command](args)
        return exit_code if exit_code is not None else 0
    except TextdetError as e:
        print(f"textdet {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"textdet {args.command}: interrupted", file=sys.stderr)
        return 130


def _parse_size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ConfigError(f"--size {text!r}: expected WxH, e.g. 1280x720") from None
    return w, h


def cmd_train(args: argparse.Namespace) -> int:
    from textdet.watch.startup import StartupTimer

    startup = StartupTimer()
    startup.stages["python start"] = _T_MAIN - startup.t0
    startup.last = _T_MAIN
    from textdet.commands.recipe import ensure_builtin_data, load_cfg, needs_builtin_data

    if not args.config and needs_builtin_data(args.opt):  # the one-time generation: its own row
        generated = ensure_builtin_data()
        startup.mark("built-in data (generated, once)" if generated else "built-in data (cached)")
    cfg = load_cfg(args)  # config and data errors surface before the seconds spent importing torch
    from textdet.build.sections import check_weight_paths, train_splits, train_weight_keys, validate

    check_weight_paths(cfg, train_weight_keys(cfg))  # after the YAML, before torch: a typo fails in a second
    pipelines = validate(cfg, train_splits(cfg))
    startup.mark("config")
    import torch  # noqa: F401  (timed as the import stage)

    from textdet.build.training import build_trainer
    from textdet.watch.profiling import parse_window

    startup.mark("imports")
    profile_window = parse_window(args.profile) if args.profile else None
    progress = False if args.no_progress else None  # None: bars when stdout is a terminal
    trainer = build_trainer(cfg, device=args.device, compile=args.compile, progress=progress, startup=startup,
                            dry_run=args.dry_run, overwrite=args.overwrite, pipelines=pipelines,
                            profile_window=profile_window)
    if args.dry_run:
        startup.mark("dry run checks")
        print(trainer.watch.banner)
        print("start-up so far (seconds since process start):\n" + startup.table())
        print("dry run: config, data and model are valid; no step was taken")
        return 0
    try:
        trainer.fit()
    finally:
        from textdet.runtime.ranks import cleanup

        cleanup()
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    if args.compare and not args.report:
        raise ConfigError("--compare draws two models side by side in a report: add --report DIR")
    if args.protocol:
        args.opt = [*args.opt, f"metric.protocol={args.protocol}"]
    args.opt = [*args.opt, *tile_overrides(args)]
    from textdet.commands.recipe import load_cfg

    cfg = load_cfg(args)
    if not args.ckpt and not args.onnx:
        from textdet.build.sections import check_weight_paths

        check_weight_paths(cfg, ("eval.ckpt_load_path",))  # before torch: a typo fails in a second
    from textdet.commands.evaluate import evaluate_model, result_text, run_report

    progress = not args.no_progress and sys.stdout.isatty() and not args.json
    if args.report:
        result = run_report(cfg, args.config, args.ckpt, args.onnx, args.device, progress, args.report,
                            args.compare)
    else:
        result = evaluate_model(cfg, args.ckpt, args.onnx, args.device, progress, args.sweep)
    result["protocol"] = cfg.metric.get("protocol", "icdar15")
    print(json.dumps(result) if args.json else result_text(result, args.sweep))
    return 0


def tile_overrides(args: argparse.Namespace) -> list[str]:
    """``--tile HxW --overlap PX`` as the config keys they set (``eval.tile``, ``eval.tile_overlap``)."""
    overrides = []
    if args.tile:
        from textdet.data.tiling import parse_tile

        spec = parse_tile(args.tile, args.overlap)
        overrides.append(f"eval.tile=[{spec.height},{spec.width}]")
    if args.overlap is not None:
        overrides.append(f"eval.tile_overlap={args.overlap}")
    return overrides


def cmd_synth(args: argparse.Namespace) -> int:
    from textdet.data.synth import generate_dataset

    summary = generate_dataset(args.out_dir, args.train, args.val, seed=args.seed, size=_parse_size(args.size),
                               n_heldout=args.heldout)
    print(json.dumps(summary, indent=2, default=str))
    return 0


def cmd_metric(args: argparse.Namespace) -> int:
    from textdet.metrics.icdar_io import evaluate_files

    protocol = args.protocol if args.protocol else "icdar15"
    result = evaluate_files(args.gt, args.pred, protocol=protocol)
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{result['protocol']}: recall {result['recall']:.4f}, precision {result['precision']:.4f}, "
          f"f-score {result['f-score']:.4f} ({result['tp']} matched of {result['n_gt']} GT "
          f"and {result['n_det']} detections, {result['images']} images)")
    return 0


def cmd_check_data(args: argparse.Namespace) -> int:
    from textdet.commands.check_data import check_data
    from textdet.commands.recipe import load_cfg

    all_good = check_data(load_cfg(args), dump_dir=args.dump, n_dump=args.n, ceiling=args.ceiling)
    return 0 if all_good else 1


def cmd_plot(args: argparse.Namespace) -> int:
    from textdet.commands.plot import plot_run

    page = plot_run(args.run_dir)
    print(f"wrote {os.path.join(args.run_dir, 'curves.png')} and {page}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    doctor = importlib.import_module("textdet.commands.doctor")
    if args.distributed:
        return doctor.run_distributed_doctor(args.nproc, args.master_addr, args.master_port, args.device)
    return doctor.run_doctor()


# Commands that only hand args to one function of their module (imported when run: torch stays out of the rest).
LAZY = {"predict": ("deploy", "run_predict"), "export": ("deploy", "run_export"), "convert": ("convert", "run_convert"),
        "bench": ("bench", "run")}


def _lazy(name: str):
    def command(args: argparse.Namespace) -> int:
        module, func = LAZY[name]
        return getattr(importlib.import_module(f"textdet.commands.{module}"), func)(args)
    return command


COMMANDS = {"train": cmd_train, "eval": cmd_eval, "synth": cmd_synth, "metric": cmd_metric, "plot": cmd_plot,
            "check-data": cmd_check_data, **{name: _lazy(name) for name in LAZY},
            "doctor": cmd_doctor}
