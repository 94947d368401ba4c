"""textdet's ICDAR2015 / TIoU / DetEval scores against the public reference scripts, on real data.

Data and references are public repositories checked out OUTSIDE this one (nothing of them is copied here):

- ``PkuDavidGuan/TIoU-metric-python3`` (the Python 3 port of Yuliang-Liu/TIoU-metric, the TIoU authors' code,
  itself built on the ICDAR2015 script): ``ic15/script.py``, and the data: ``ic15/gt.zip`` (ICDAR2015 test GT,
  500 images) and ``ic15/pixellinkch4.zip`` (PixelLink's detections). It needs the Polygon3 package.
- ``MhLiao/DB``: ``concern/icdar2015_eval/detection/icdar2013.py``, the ICDAR 2013 (DetEval) RRC script
  ported to polygons. The file calls an undefined ``num_overlaps_gt`` in a log string after a one-to-many
  match; the check gives it a stub (the log is not used).

Run::

    python -m venv ~/venvs/tiou && ~/venvs/tiou/bin/pip install Polygon3 numpy
    python benchmarks/parity/icdar/check_protocols_reference.py --tiou-repo TIoU-metric-python3 --db-repo DB \
        --tiou-python ~/venvs/tiou/bin/python

Result on 2026-12-02 (2-core shared CPU machine): all three protocols agree to 1e-15 (see README,
"What the numbers mean").
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess

from textdet.metrics.icdar_io import evaluate_files, load_gt, load_preds

TIOU_DRIVER = """
import json, os, sys
sys.argv = ["script.py"]
import script
res = script.evaluate_method("gt.zip", "pixellinkch4.zip", script.default_evaluation_params())
print("RESULT " + json.dumps({"icdar15": res["method"], "tiou": res["tiouMethod"]}), flush=True)
os._exit(0)  # Polygon3 crashes at interpreter exit on Python 3.11 (a refcount bug in its C code)
"""


def reference_tiou(repo: str, python: str) -> dict:
    """The TIoU script's own ICDAR2015 and TIoU figures (it writes a per-sample file in its folder)."""
    ic15 = os.path.join(repo, "ic15")
    out = subprocess.run([python, "-c", TIOU_DRIVER], cwd=ic15, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": ic15}, check=False).stdout
    res = json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[7:])
    return {"icdar15": (res["icdar15"]["recall"], res["icdar15"]["precision"], res["icdar15"]["hmean"]),
            "tiou": (res["tiou"]["tiouRecall"], res["tiou"]["tiouPrecision"], res["tiou"]["tiouHmean"])}


def reference_deteval(repo: str, gt: str, pred: str) -> tuple[float, float, float]:
    path = os.path.join(repo, "concern", "icdar2015_eval", "detection", "icdar2013.py")
    spec = importlib.util.spec_from_file_location("icdar2013_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.num_overlaps_gt = lambda gt_num: -1  # see the module docstring
    evaluator, gts, preds, results = module.DetectionICDAR2013Evaluator(), load_gt(gt), load_preds(pred), []
    for key in sorted(gts):
        polys, ignore = gts[key]
        gt_items = [{"points": p.tolist(), "ignore": bool(i)} for p, i in zip(polys, ignore, strict=True)]
        results.append(evaluator.evaluate_image(gt_items, [{"points": p.tolist()} for p in preds.get(key, ([],))[0]]))
    m = evaluator.combine_results(results)
    return m["recall"], m["precision"], m["hmean"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiou-repo", required=True, help="checkout of PkuDavidGuan/TIoU-metric-python3")
    parser.add_argument("--db-repo", required=True, help="checkout of MhLiao/DB")
    parser.add_argument("--tiou-python", required=True, help="a Python with Polygon3 and numpy")
    args = parser.parse_args()
    gt, pred = (os.path.join(args.tiou_repo, "ic15", n) for n in ("gt.zip", "pixellinkch4.zip"))
    refs = {**reference_tiou(args.tiou_repo, args.tiou_python), "deteval": reference_deteval(args.db_repo, gt, pred)}
    worst = 0.0
    print(f"{'protocol':9} {'side':10} {'recall':>18} {'precision':>18} {'f-score':>18}")
    for protocol, ref in refs.items():
        ours = evaluate_files(gt, pred, protocol=protocol)
        ours = (ours["recall"], ours["precision"], ours["f-score"])
        for side, vals in (("reference", ref), ("textdet", ours)):
            print(f"{protocol:9} {side:10} " + " ".join(f"{v:18.15f}" for v in vals))
        worst = max(worst, *(abs(a - b) for a, b in zip(ref, ours, strict=True)))
    print(f"largest difference: {worst:.1e}")


if __name__ == "__main__":
    main()
