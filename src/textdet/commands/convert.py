"""``textdet convert FORMAT``: labels, checkpoints and models from other tools into textdet's."""

from __future__ import annotations

import argparse
import os
from typing import Any

from textdet.build.parts import build_model_from_config
from textdet.commands.ppocr import convert_ppocr
from textdet.config import load_config
from textdet.data.annotations import Summary
from textdet.data.formats import read_records, write_records
from textdet.data.label_shapes import relabel, split_advice
from textdet.data.labels import convert_icdar15
from textdet.data.public_sets import SPLITS, lay_out_copiste, lay_out_sroie
from textdet.errors import TextdetError
from textdet.models.ms_ckpt import mindspore_to_torch_names, read_ms_checkpoint
from textdet.models.weights import load_model_weights, weights_file
from textdet.runtime.checkpoint import atomic_save


def run_convert(args: argparse.Namespace) -> int:
    """Dispatch on ``args.format``; every label format in ``FORMATS`` goes through ``_convert_labels``."""
    run = {"icdar15": _convert_icdar15, "ppocr": _convert_ppocr, "mindocr": _convert_mindocr,
           "sroie": _convert_public_set, "copiste": _convert_public_set}.get(args.format)
    return (run or _convert_labels)(args)


def _convert_icdar15(args: argparse.Namespace) -> int:
    n = convert_icdar15(args.gt_dir, args.out, image_prefix=args.image_prefix)
    print(f"wrote {n} images' labels to {args.out}")
    return 0


def _convert_public_set(args: argparse.Namespace) -> int:
    """``textdet convert sroie|copiste SRC --out DIR``: the images and labels, train and val, in MindOCR's
    layout."""
    lay_out, what = {"sroie": (lay_out_sroie, "receipts"), "copiste": (lay_out_copiste, "pages")}[args.format]
    counts = lay_out(args.input, args.out, args.num, args.max_side)
    for split, (images, boxes) in counts.items():
        label_file = os.path.join(args.out, SPLITS[split])
        print(f"{split}: {images} {what}, {boxes} boxes -> {label_file} (images in "
              f"{os.path.join(args.out, split, 'images')})")
    return 0


def _convert_ppocr(args: argparse.Namespace) -> int:
    summary = convert_ppocr(args.model, args.out, name=args.name)
    print(f"{summary['release']}: wrote {summary['checkpoint']} ({summary['tensors']} tensors) "
          f"and {summary['config']}")
    return 0


def _convert_labels(args: argparse.Namespace) -> int:
    options = {"split": args.split} if getattr(args, "split", None) else {}
    summary = convert_labels(args.format, args.input, args.out, args.to, args.image_dir, args.shape,
                             **options)
    print(f"{args.format}: {summary} -> {args.out}")
    if summary.split:
        print(f"warning: {split_advice(summary.split, summary.regions - summary.ignored)}")
    return 0


def convert_labels(fmt: str, src: str, out: str, to: str = "label", image_dir: str | None = None,
                   shape: str = "outline", **options: Any) -> Summary:
    """Read ``src`` in format ``fmt`` (a FORMATS key), each region as ``shape`` (data/label_shapes.py).
    Write a label file or, ``to="labelme"``, labelme files. The summary counts the regions that still
    split."""
    summary = Summary()
    records = read_records(fmt, src, summary, image_dir, **options)
    summary.split = relabel(records, shape)
    write_records(records, out, to, image_dir)
    return summary


def _convert_mindocr(args: argparse.Namespace) -> int:
    """MindSpore names -> ours; with -c every model tensor must be in the file with its shape."""
    path = weights_file(args.input, "convert mindocr", "give a local .ckpt path")
    tensors, skipped = read_ms_checkpoint(path)
    weights, training = mindspore_to_torch_names(tensors)
    print(f"{path}: {len(weights)} weight tensors; left out {len(training)} optimizer/training entries"
          + (f" ({', '.join(training[:4])}{', ...' if len(training) > 4 else ''})" if training else "")
          + (f" and {len(skipped)} non-tensor entries ({', '.join(skipped[:4])})" if skipped else ""))
    if args.config:
        cfg = load_config(args.config, [*args.opt, "model.pretrained=false"])  # the model only, no weights
        report = load_model_weights(build_model_from_config(cfg, False), path, "convert mindocr")
        if report.missing or report.unexpected or report.mismatched:
            raise TextdetError(f"{path} does not match the model of {args.config}:\n{report}")
        print(f"matches {args.config}: all {len(report.loaded)} tensors have a place and a shape there")
    atomic_save({"model": weights, "converted_from": os.path.basename(str(path))}, args.out)
    print(f"wrote {args.out}")
    return 0
